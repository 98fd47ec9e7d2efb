"""PyTorch twin of examples/seq2seq.py: same digit strings, batches, coin flips, model, optimiser,
clipping, learning-rate schedule and updates, for comparing training time and exact match.

    python -m bench.end_to_end.torch_seq2seq [--task reverse] [--max-len 12] [--steps 3000]
                                             [--cell rnn|gru|lstm] [--threads 1]

The model of ``rnnfast.nn.seq2seq.Seq2Seq``: Embedding -> RNN (GRU, LSTM: ``--cell``) encodes
each source to its own length; its final state is the context, handed to the decoder as
``--context`` says (``init``: its initial state, the LSTM's pair (h, c); ``input``: h appended
to the token vector at every step; ``both``, the example's default); Embedding -> RNN ->
Linear decodes. As in the example, two models train from the same seed on the same batches,
the learning rate cosine-annealed to 0: one reading the ground truth (teacher forcing), one
with scheduled sampling, where each fed token after the first is the truth with the
schedule's probability, else the model's own greedy choice of the step before (picked by a
pass without gradient; the coin flips drawn from the batches' generator, as rnnfast's
``train_batch`` draws them). Each is decoded greedily on the held-out strings for exact match
(every digit and the end token right). ``--threads 1`` is the example's default. Prints the
seconds per epoch of each model as the example does (an epoch: as many strings as the training
set holds) and ends with ``RESULT exact_match_greedy=... exact_match_greedy_tf=... time_s=...``
(the first: the scheduled-sampling model, the example's ``exact_match_greedy``).
"""

from __future__ import annotations

import time

import numpy as np
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence

from bench.end_to_end import _twin
from examples._tasks import (
    BOS,
    SRC_VOCAB,
    TGT_VOCAB,
    encode_batch,
    make_strings,
    schedule_constants,
)
from rnnfast.nn.seq2seq import SCHEDULES, teacher_forcing_schedule


class Seq2Seq(nn.Module):
    def __init__(self, cell, embed, hidden, context):
        super().__init__()
        self.as_init = context in ("init", "both")
        self.as_input = context in ("input", "both")
        self.encoder_embedding = nn.Embedding(SRC_VOCAB, embed)
        self.encoder = _twin.recurrent(cell, embed, hidden, batch_first=True)
        self.decoder_embedding = nn.Embedding(TGT_VOCAB, embed)
        decoder_in = embed + (hidden if self.as_input else 0)
        self.decoder = _twin.recurrent(cell, decoder_in, hidden, batch_first=True)
        self.output = nn.Linear(hidden, TGT_VOCAB)

    def encode(self, src, src_lengths):
        """The encoder's final state after each source's own last token: (1, B, H), or the
        LSTM's pair."""
        packed = pack_padded_sequence(
            self.encoder_embedding(src), src_lengths, batch_first=True, enforce_sorted=False
        )
        return self.encoder(packed)[1]

    def decode(self, tokens, context, state):
        """Logits (B, T, V) of the decoder reading ``tokens`` (B, T) from ``state``, and its
        state after them."""
        x = self.decoder_embedding(tokens)
        if self.as_input:
            h = _twin.hidden(context)[0]  # (B, H): the LSTM's h, its c stays private
            x = torch.cat([x, h[:, None].expand(-1, x.shape[1], -1)], dim=2)
        y, state = self.decoder(x, state)
        return self.output(y), state

    def start(self, src, src_lengths):
        """(context, the decoder's initial state)."""
        context = self.encode(src, src_lengths)
        return context, (context if self.as_init else None)

    def forward(self, src, src_lengths, tgt_in):
        context, state = self.start(src, src_lengths)
        return self.decode(tgt_in, context, state)[0]


def tensors(*arrays):
    return [torch.from_numpy(np.asarray(a, dtype=np.int64)) for a in arrays]


def scheduled_inputs(model, src, sl, tgt_in, ratio, rng):
    """The tokens fed at every step: the truth with probability ``ratio``, else the greedy
    prediction of the step before (rnnfast's ``Seq2Seq._scheduled_inputs``, the same draws)."""
    batch, steps = tgt_in.shape
    teacher = rng.random((batch, steps)) < ratio
    teacher[:, 0] = True
    fed = tgt_in.copy()
    if teacher.all():
        return fed
    with torch.no_grad():
        context, state = model.start(*tensors(src, sl))
        for t in range(steps - 1):
            logits, state = model.decode(torch.from_numpy(fed[:, t : t + 1]), context, state)
            own = logits[:, 0].argmax(1).numpy()
            fed[:, t + 1] = np.where(teacher[:, t + 1], tgt_in[:, t + 1], own)
    return fed


def train(args, strings, scheduled, seed):
    model = Seq2Seq(args.cell, args.embed, args.hidden, args.context)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    lr_schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.steps)
    rng = np.random.default_rng(seed)  # the same batches for both runs, and the coin flips
    constants = schedule_constants(args.schedule, max(args.midpoint * args.steps, 1.0))
    for i in range(args.steps):
        batch = [strings[j] for j in rng.integers(0, len(strings), args.batch_size)]
        ratio = teacher_forcing_schedule(args.schedule, i, **constants) if scheduled else 1.0
        src, sl, tgt_in, tgt_out, tl = encode_batch(batch, args.task)
        if ratio < 1.0 and tgt_in.shape[1] > 1:
            tgt_in = scheduled_inputs(model, src, sl, tgt_in, ratio, rng)
        optimizer.zero_grad()
        logits = model(*tensors(src, sl, tgt_in))
        valid = torch.from_numpy(np.arange(tgt_out.shape[1]) < tl[:, None])
        loss = nn.functional.cross_entropy(logits[valid], tensors(tgt_out)[0][valid])
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        optimizer.step()
        lr_schedule.step()
    return model.eval()


def exact_match(model, strings, task):
    """The share of held-out strings whose greedy decoding gets every target token (the digits
    and the end token) right; what follows a string's end is not read."""
    src, sl, _, tgt_out, tl = encode_batch(strings, task)
    steps = tgt_out.shape[1]
    tokens = torch.full((len(strings), 1), BOS)
    predicted = np.empty(tgt_out.shape, dtype=np.int64)
    with torch.no_grad():
        context, state = model.start(*tensors(src, sl))
        for t in range(steps):
            logits, state = model.decode(tokens, context, state)
            tokens = logits[:, -1].argmax(1, keepdim=True)
            predicted[:, t] = tokens[:, 0].numpy()
    valid = np.arange(steps) < tl[:, None]
    return float(1.0 - ((predicted != tgt_out) & valid).any(axis=1).mean())


def main(argv=None):
    args = _twin.parse_args(
        __doc__,
        argv,
        epochs=None,
        options={
            "--task": "reverse",
            "--min-len": 3,
            "--max-len": 12,
            "--train-size": 20000,
            "--test-size": 1000,
            "--steps": 3000,
            "--schedule": "inverse_sigmoid",
            "--midpoint": 0.3,
            "--batch-size": 64,
            "--embed": 32,
            "--hidden": 128,
            "--context": "both",
            "--lr": 3e-3,
        },
        threads=1,
    )
    if args.schedule not in SCHEDULES:
        raise SystemExit(f"--schedule: expected one of {SCHEDULES}, got {args.schedule!r}")
    start = _twin.start(args)
    rng = np.random.default_rng(args.seed)
    test = make_strings(rng, args.test_size, args.min_len, args.max_len)
    train_strings = make_strings(
        rng, args.train_size, args.min_len, args.max_len, exclude=frozenset(test)
    )
    matches, train_s = {}, []
    for label, scheduled in (("teacher forcing", False), ("scheduled sampling", True)):
        began = time.perf_counter()
        model = train(args, train_strings, scheduled, args.seed + 1)
        train_s.append(time.perf_counter() - began)
        matches[label] = exact_match(model, test, args.task)
        print(f"{label}: exact match (greedy) {matches[label]:.3f}")
    epochs = args.steps * args.batch_size / len(train_strings)
    _twin.print_epoch_times(
        [t / epochs for t in train_s],
        f" (teacher forcing, scheduled sampling; {epochs:.2f} epochs of {len(train_strings)} "
        "strings each)",
    )
    print(
        f"RESULT exact_match_greedy={matches['scheduled sampling']:.4f} "
        f"exact_match_greedy_tf={matches['teacher forcing']:.4f} "
        f"time_s={time.perf_counter() - start:.1f}"
    )


if __name__ == "__main__":
    main()
