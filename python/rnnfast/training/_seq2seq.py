"""fit / evaluate for ``Seq2Seq`` on variable-length pairs: ragged lists of source and target
token sequences, batched by length, padded one batch at a time, the padding left out of the
loss and of the corpus figures (token accuracy, perplexity)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from ..data.batching import BucketedBatches
from ..losses import cross_entropy
from ..metrics import accuracy_counts
from ..optim import clip_grad_norm
from ._loop import Loop, takes_options

__all__ = ["evaluate_seq2seq", "fit_seq2seq"]


def _sequences(name, value):
    seqs = [np.asarray(s) for s in value] if isinstance(value, (list, tuple)) else None
    if not seqs or any(s.ndim != 1 or s.dtype.kind not in "iu" for s in seqs):
        raise TypeError(
            f"{name}: expected a non-empty list of 1-D integer token arrays (one "
            "sequence each, of any length)"
        )
    return seqs


def _pairs(sources, targets):
    src, tgt = _sequences("sources", sources), _sequences("targets", targets)
    if len(src) != len(tgt):
        raise ValueError(f"targets: expected {len(src)} sequences (one per source), got {len(tgt)}")
    return src, tgt


def _pad(seqs, lengths, value=0):
    out = np.full((len(seqs), max(int(lengths.max()), 1)), value, dtype=np.int64)
    for b, s in enumerate(seqs):
        out[b, : len(s)] = s
    return out


def _batch(src, tgt, index, bos, eos):
    """Padded (B, S) sources and (B, T) decoder inputs / targets with their lengths: the
    decoder reads ``[bos, y_1, ..., y_n]`` and predicts ``[y_1, ..., y_n, eos]`` (without eos:
    it reads ``[bos, y_1, ..., y_{n-1}]`` and predicts ``y``)."""
    s = [src[i] for i in index]
    t = [tgt[i] for i in index]
    tail = [] if eos is None else [eos]
    tgt_in = [np.concatenate([[bos], y if eos is not None else y[:-1]]) for y in t]
    tgt_out = [np.concatenate([y, tail]) for y in t]
    src_len = np.array([len(x) for x in s], dtype=np.int64)
    tgt_len = np.array([len(y) for y in tgt_out], dtype=np.int64)
    return (
        _pad(s, src_len),
        src_len,
        _pad(tgt_in, tgt_len).astype(np.int64),
        _pad(tgt_out, tgt_len),
        tgt_len,
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class Seq2SeqOptions:
    """The keywords of :func:`fit_seq2seq`."""

    optimizer: object
    bos: int
    eos: object = None
    epochs: int = 1
    batch_size: int = 32
    teacher_forcing: object = 1.0
    bucket: bool = True
    max_tokens: object = None
    clip_norm: object = None
    seed: object = None
    validation_data: object = None
    callbacks: object = ()
    verbose: object = "auto"
    backup_dir: object = None
    backup_every: object = None


@takes_options(Seq2SeqOptions)
def fit_seq2seq(model, sources, targets, options):
    """Train a ``Seq2Seq`` on ragged (source, target) token sequences; returns the history
    (``loss``, and ``val_loss`` / ``val_accuracy`` / ``val_perplexity`` with validation data).

    Parameters
    ----------
    sources, targets : lists of 1-D int arrays, one pair per example, of any lengths
    bos, eos : int
        The decoder's start token; the end token appended to each target (optional).
    teacher_forcing : float in [0, 1], or callable ``step -> float``
        The teacher-forcing ratio (scheduled sampling below 1), or a schedule of it over the
        optimizer steps (``seq2seq.teacher_forcing_schedule``).
    bucket, max_tokens : batches of similar source lengths (``data.BucketedBatches``).
    verbose, backup_dir, backup_every
        As :func:`fit`; a backup also keeps the teacher-forcing clock and the coins' generator.
    """
    return Seq2SeqLoop(model, sources, targets, options).run()


class Seq2SeqLoop(Loop):
    """fit_seq2seq's loop: batches of (source, target) pairs, each a teacher-forced step of
    ``model.train_batch``; the loss is the mean over the target tokens."""

    resets_state = False  # a Seq2Seq starts every batch from its encoder's state

    def __init__(self, model, sources, targets, options):
        super().__init__(model, options)
        self.src, self.tgt = _pairs(sources, targets)
        self.rng = np.random.default_rng(options.seed)
        self.lengths = np.array([len(s) for s in self.src], dtype=np.int64)
        self.steps = 0  # optimizer steps tried: a teacher-forcing schedule's clock
        self.optimizer = options.optimizer

    def loop_state(self):
        return {"steps": self.steps}

    def load_loop_state(self, state):
        self.steps = int(state["steps"])

    def batches(self, epoch):
        o = self.options
        if o.bucket or o.max_tokens is not None:
            return list(
                BucketedBatches(
                    np.maximum(self.lengths, 1),
                    o.batch_size,
                    max_tokens=o.max_tokens,
                    shuffle=True,
                    seed=int(self.rng.integers(2**31)),
                )
            )
        order = self.rng.permutation(len(self.src))
        return [order[i : i + o.batch_size] for i in range(0, len(self.src), o.batch_size)]

    def step(self, index):
        o = self.options
        s, s_len, t_in, t_out, t_len = _batch(self.src, self.tgt, index, o.bos, o.eos)
        forcing = o.teacher_forcing
        ratio = forcing(self.steps) if callable(forcing) else forcing
        self.model.zero_grad()
        loss = self.model.train_batch(
            s, s_len, t_in, t_out, t_len, teacher_forcing_ratio=ratio, rng=self.rng
        )
        self.steps += 1
        if o.clip_norm is not None and not math.isfinite(clip_grad_norm(self.model, o.clip_norm)):
            return None
        self.optimizer.step()
        tokens = int(t_len.sum())
        return loss, tokens, tokens

    def validate(self):
        o = self.options
        if o.validation_data is None:
            return None
        return evaluate_seq2seq(
            self.model, *o.validation_data, bos=o.bos, eos=o.eos, batch_size=o.batch_size
        )


def evaluate_seq2seq(model, sources, targets, *, bos, eos=None, batch_size=256):
    """Teacher-forced loss, token accuracy and perplexity over the whole data set, padding
    left out: ``{"loss", "accuracy", "perplexity"}`` from corpus counts."""
    src, tgt = _pairs(sources, targets)
    model.eval()
    order = np.argsort([-len(s) for s in src], kind="stable")  # similar lengths together
    total, hits, counted = 0.0, 0, 0
    for start in range(0, len(src), batch_size):
        s, s_len, t_in, t_out, t_len = _batch(src, tgt, order[start : start + batch_size], bos, eos)
        logits = model.forward(s, s_len, t_in, t_len)
        loss, _ = cross_entropy(logits, t_out, lengths=t_len, batch_first=True, reduction="sum")
        h, c = accuracy_counts(logits, t_out, lengths=t_len, batch_first=True)
        total, hits, counted = total + loss, hits + h, counted + c
    mean = total / max(counted, 1)
    return {
        "loss": mean,
        "accuracy": hits / counted if counted else math.nan,
        "perplexity": math.exp(mean),
    }
