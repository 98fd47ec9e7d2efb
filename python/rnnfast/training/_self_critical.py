"""Sequence-level training of a ``Seq2Seq``: REINFORCE with the greedy decode as the baseline,
self-critical sequence training (Rennie et al., 2017, "Self-critical Sequence Training for
Image Captioning", CVPR). The lecture notes' answer to exposure bias (slide 40, solution 3):
optimise a sequence-level reward such as BLEU on the model's own rollouts.

Per source the model samples a sequence y^s from its own distribution and decodes one greedily,
y^g; the loss is ``-(r(y^s) - r(y^g)) * log p(y^s | x)``, whose gradient is an unbiased
estimate of ``-grad E[r]`` (the baseline r(y^g) does not depend on the sample, so it changes
the variance and not the expectation). A sample better than what the model would say greedily
is made more likely, a worse one less.

:func:`policy_gradient` turns (sampled sequences, advantages) into parameter gradients through
the model's own teacher-forced forward and backward on the sampled tokens (the log-probability
of a sequence the model sampled is exactly the one it assigns when fed that sequence), and
:func:`fit_self_critical` runs it over a data set on the training loop of ``fit_seq2seq``.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .._validation import check_finite_real, check_positive_int
from ..decoding import sequence_lengths
from ..losses import log_softmax
from ..optim import clip_grad_norm
from ._loop import takes_options
from ._scoring import resolve_reward
from ._seq2seq import Seq2SeqLoop, _pad

__all__ = ["fit_self_critical", "policy_gradient"]


def policy_gradient(model, src, src_lengths, tokens, lengths, advantages, *, bos):
    """Add the gradients of ``-mean_b(advantages[b] * log p(tokens[b] | src[b]))`` into
    ``model.grads``: the REINFORCE step of sequences the model generated.

    Parameters
    ----------
    model : Seq2Seq, in training mode
    src, src_lengths : int arrays (B, S), (B,) (None: all S)
    tokens : int array (B, T)
        The generated sequences (what ``generate`` returns), each read up to its length.
    lengths : int array (B,)
        How many tokens of each sequence the model chose (its end token included:
        ``decoding.sequence_lengths``).
    advantages : float array (B,)
        Each sequence's weight: its reward minus the baseline.
    bos : int
        The start token the decoder read first.

    Returns
    -------
    loss : float
        The surrogate loss above (its value is not a reward; its gradient is the estimate).
    log_probs : float64 array (B,)
        log p(tokens[b] | src[b]) of each sequence as the model scores it.
    """
    tokens = np.asarray(tokens)
    if tokens.ndim != 2 or tokens.dtype.kind not in "iu":
        raise TypeError(
            f"tokens: expected an integer array (B, T) of generated ids, got "
            f"{tokens.dtype} of shape {tokens.shape}"
        )
    batch, steps = tokens.shape
    adv = np.asarray(advantages, dtype=np.float64)
    if adv.shape != (batch,) or not np.all(np.isfinite(adv)):
        raise ValueError(
            f"advantages: expected {batch} finite numbers (one per sequence), got shape {adv.shape}"
        )
    # the decoder reads [bos, y_1, ..., y_{T-1}] and scores y_1, ..., y_T: teacher forcing on
    # the model's own sequence
    fed = np.concatenate([np.full((batch, 1), bos, np.int64), tokens[:, :-1]], axis=1)
    logits = model.forward(src, src_lengths, fed, lengths)  # checks the ids and lengths
    lengths = np.asarray(lengths, np.int64)
    valid = np.arange(steps)[None, :] < lengths[:, None]
    log_p = log_softmax(logits.astype(np.float64), axis=2)
    picked = np.take_along_axis(log_p, tokens[:, :, None].astype(np.int64), axis=2)[..., 0]
    seq_log_p = np.where(valid, picked, 0.0).sum(axis=1)
    # d(-a log p(y_t)) / d logits = a * (softmax - onehot(y_t)), per counted position
    d_logits = np.exp(log_p)
    index = tokens[:, :, None].astype(np.int64)
    np.put_along_axis(d_logits, index, np.take_along_axis(d_logits, index, axis=2) - 1.0, axis=2)
    d_logits *= (valid * (adv / batch)[:, None])[..., None]
    model.backward(d_logits.astype(model.dtype))
    return float(-(adv * seq_log_p).mean()), seq_log_p


@dataclasses.dataclass(frozen=True, kw_only=True)
class SelfCriticalOptions:
    """The keywords of :func:`fit_self_critical`."""

    optimizer: object
    bos: int
    eos: object = None
    reward: object = "bleu"
    max_len: object = None
    temperature: float = 1.0
    epochs: int = 1
    batch_size: int = 32
    bucket: bool = True
    max_tokens: object = None
    clip_norm: object = None
    seed: object = None
    validation_data: object = None
    callbacks: object = ()
    verbose: object = "auto"
    backup_dir: object = None
    backup_every: object = None


@takes_options(SelfCriticalOptions)
def fit_self_critical(model, sources, targets, options):
    """Train a ``Seq2Seq`` on a sequence-level reward by self-critical sequence training
    (REINFORCE with the greedy decode's reward as the baseline; Rennie et al., 2017).

    Each batch: one sampled sequence y^s and one greedy y^g per source, the loss
    ``-(r(y^s, y) - r(y^g, y)) * log p(y^s | x)`` averaged over the batch, one optimizer step.
    As in the paper, start from a model trained with teacher forcing (``fit_seq2seq``): from
    random weights the samples are noise, every reward near zero and the advantages carry no
    signal.

    Parameters
    ----------
    model : Seq2Seq
    sources, targets : lists of 1-D int arrays, one pair per example, of any lengths
        The targets without start or end tokens (the references of the reward).
    optimizer : an rnnfast optimizer over ``model``
    bos, eos : int
        The decoder's start token; the end token (optional: without it every rollout is
        ``max_len`` tokens long). A rollout is scored up to its first ``eos``, which counts
        as one of its tokens in log p and is left out of the reward's hypothesis.
    reward : "bleu" or callable ``reward(hypothesis, reference) -> float``
        "bleu": :func:`rnnfast.training.sentence_bleu` (needs sacrebleu, ``rnnfast[bleu]``).
        It gets 1-D int arrays of token ids.
    max_len : int, optional
        Tokens per rollout; by default the longest target plus one (for ``eos``).
    temperature : float > 0
        The sampling temperature of y^s (1: the model's own distribution, which REINFORCE's
        gradient assumes).
    epochs, batch_size, bucket, max_tokens, clip_norm, seed, validation_data, callbacks,
    verbose, backup_dir, backup_every
        As :func:`fit_seq2seq` (``seed`` also seeds the samples; a backup also keeps the
        epoch's reward sums).

    Returns
    -------
    history : dict of lists, one entry per epoch
        ``loss`` (the surrogate loss), ``reward`` (mean reward of the samples), ``greedy_reward``
        (of the greedy decodes: the baseline, and what decoding at test time gets) and, with
        validation data, ``fit_seq2seq``'s ``val_loss``, ``val_accuracy`` and
        ``val_perplexity``.

    Raises
    ------
    TypeError, ValueError
        Bad sequences, an unknown reward name, max_len < 1, temperature <= 0.
    """
    return SelfCriticalLoop(model, sources, targets, options).run()


class SelfCriticalLoop(Seq2SeqLoop):
    """fit_self_critical's loop: fit_seq2seq's batches, each a self-critical step."""

    def __init__(self, model, sources, targets, options):
        super().__init__(model, sources, targets, options)
        self.reward_fn = resolve_reward(options.reward)
        longest = max(len(t) for t in self.tgt) + (0 if options.eos is None else 1)
        self.max_len = check_positive_int(
            "max_len", longest if options.max_len is None else options.max_len
        )
        self.temperature = check_finite_real("temperature", options.temperature)
        if self.temperature <= 0:
            raise ValueError(f"temperature: expected a number > 0, got {self.temperature}")
        self.sums = np.zeros(3)  # rewards of the samples, of the greedy decodes, sequences

    def batches(self, epoch):
        self.sums[:] = 0.0
        return super().batches(epoch)

    def _rewards(self, tokens, lengths, refs):
        """The reward of each rollout, its end token left out of the hypothesis."""
        o = self.options
        out = np.empty(len(refs))
        for b, (seq, n, ref) in enumerate(zip(tokens, lengths, refs)):
            hyp = seq[:n]
            if o.eos is not None and n and hyp[-1] == o.eos:
                hyp = hyp[:-1]
            out[b] = float(self.reward_fn(hyp, ref))
        return out

    def step(self, index):
        o = self.options
        model = self.model
        refs = [self.tgt[i] for i in index]
        src_list = [self.src[i] for i in index]
        s_len = np.array([len(s) for s in src_list], dtype=np.int64)
        src = _pad(src_list, s_len)
        sampled, _ = model.generate(
            src, s_len, self.max_len, "sample", bos=o.bos, eos=o.eos,
            temperature=self.temperature, rng=self.rng,
        )  # fmt: skip
        greedy, _ = model.generate(src, s_len, self.max_len, "greedy", bos=o.bos, eos=o.eos)
        n_sampled = sequence_lengths(sampled, o.eos)
        r_sample = self._rewards(sampled, n_sampled, refs)
        r_greedy = self._rewards(greedy, sequence_lengths(greedy, o.eos), refs)
        model.zero_grad()
        loss, _ = policy_gradient(
            model, src, s_len, sampled, n_sampled, r_sample - r_greedy, bos=o.bos
        )
        self.sums += (r_sample.sum(), r_greedy.sum(), len(index))
        if o.clip_norm is not None and not np.isfinite(clip_grad_norm(model, o.clip_norm)):
            return None
        self.optimizer.step()
        return loss, len(index), len(index)

    def local_state(self):
        return {**super().local_state(), "rewards": [float(v) for v in self.sums]}

    def load_epoch_state(self, mine):
        super().load_epoch_state(mine)
        self.sums[:] = mine["rewards"]

    def epoch_logs(self):
        n = max(self.sums[2], 1.0)
        return {"reward": float(self.sums[0] / n), "greedy_reward": float(self.sums[1] / n)}
