"""PyTorch twin of examples/tagging.py: same treebank, split, vocabularies, bucketed batches,
model, optimiser and epochs, for comparing training time and token accuracy.

    python -m bench.end_to_end.torch_tagging --data UD_English-EWT [--epochs 10] [--hidden 128]
                                             [--cell rnn|gru|lstm] [--threads 2]

``--data`` as the example's: a UD treebank folder or one CoNLL-U file (split 80/10/10 by
examples/_tasks.py, as the example splits it). Embedding -> bidirectional RNN (GRU, LSTM:
``--cell``) over each sentence to its own length (``pack_padded_sequence``, what the example's
``mask_zero`` and lengths give) -> Linear over the UPOS tags; the loss and the accuracy count
only the real words. Each epoch takes the example's batches (``rnnfast.data.BucketedBatches``
seeded as ``training.fit`` seeds it) and ends with the validation on the dev split, as the
example's ``validation_data`` does. Prints the seconds of each epoch as the example does, and
ends with ``RESULT test_accuracy=... time_s=...``.
"""

from __future__ import annotations

import time

import numpy as np
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from bench.end_to_end import _twin
from examples._tasks import load_splits
from rnnfast.data import BucketedBatches, Vocabulary


class Tagger(nn.Module):
    def __init__(self, vocab, embed, hidden, tags, cell="rnn"):
        super().__init__()
        self.embedding = nn.Embedding(vocab, embed)
        self.rnn = _twin.recurrent(cell, embed, hidden, batch_first=True, bidirectional=True)
        self.dense = nn.Linear(2 * hidden, tags)

    def forward(self, x, lengths):
        packed = pack_padded_sequence(
            self.embedding(x), lengths, batch_first=True, enforce_sorted=False
        )
        y, _ = self.rnn(packed)
        y, _ = pad_packed_sequence(y, batch_first=True, total_length=x.shape[1])
        return self.dense(y)


def padded(sequences, index):
    """The sequences at ``index`` as a zero-padded (B, T) int64 tensor, their lengths (B,) and
    the (B, T) mask of the real positions."""
    lengths = np.array([len(sequences[i]) for i in index])
    out = np.zeros((len(index), lengths.max()), dtype=np.int64)
    for row, i in enumerate(index):
        out[row, : lengths[row]] = sequences[i]
    mask = np.arange(out.shape[1]) < lengths[:, None]
    return torch.from_numpy(out), torch.from_numpy(lengths), torch.from_numpy(mask)


def scores(model, x, y, batch_size):
    """(mean loss per word, token accuracy) over the real words, longest sentences first in
    batches of ``batch_size`` (the example's evaluation order)."""
    model.eval()
    order = np.argsort(-np.array([len(s) for s in x]), kind="stable")
    loss, right, words = 0.0, 0, 0
    with torch.no_grad():
        for start in range(0, len(order), batch_size):
            index = order[start : start + batch_size]
            xb, lengths, mask = padded(x, index)
            yb, _, _ = padded(y, index)
            logits = model(xb, lengths)[mask]
            loss += nn.functional.cross_entropy(logits, yb[mask], reduction="sum").item()
            right += int((logits.argmax(1) == yb[mask]).sum())
            words += int(mask.sum())
    return loss / words, right / words


def main(argv=None):
    args = _twin.parse_args(
        __doc__,
        argv,
        epochs=10,
        options={
            "--hidden": 128,
            "--embed": 100,
            "--batch-size": 32,
            "--lr": 2e-3,
            "--min-count": 2,
        },
    )
    start = _twin.start(args)
    train, dev, test = load_splits(args.data)
    words = Vocabulary.build([s.forms for s in train], min_count=args.min_count)  # <pad> = 0
    tags = Vocabulary.build([s.upos for s in train + dev + test], pad=None, unk=None)
    x_train, x_dev, x_test = (words.encode_batch([s.forms for s in p]) for p in (train, dev, test))
    y_train, y_dev, y_test = (tags.encode_batch([s.upos for s in p]) for p in (train, dev, test))
    model = Tagger(len(words), args.embed, args.hidden, len(tags), args.cell)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    lengths = np.array([len(s) for s in x_train])
    rng = np.random.default_rng(args.seed)  # training.fit's: one draw per epoch seeds its batches
    clock = _twin.EpochClock()
    for epoch in range(args.epochs):
        model.train()
        batches = list(
            BucketedBatches(lengths, args.batch_size, shuffle=True, seed=int(rng.integers(2**31)))
        )
        bar = _twin.progress(batches, f"epoch {epoch + 1}/{args.epochs}")
        for index in bar:
            xb, lb, mask = padded(x_train, index)
            yb, _, _ = padded(y_train, index)
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(xb, lb)[mask], yb[mask])
            loss.backward()
            optimizer.step()
            bar.set_postfix(loss=f"{loss.item():.4f}", refresh=False)
        if dev:
            val_loss, val_accuracy = scores(model, x_dev, y_dev, args.batch_size)
            print(f"epoch {epoch + 1}: val_loss={val_loss:.4f} val_accuracy={val_accuracy:.4f}")
        clock.lap()
    _, accuracy = scores(model, x_test, y_test, args.batch_size)
    print(f"test accuracy {accuracy:.4f} on {sum(map(len, test))} words")
    _twin.print_epoch_times(clock.seconds)
    print(f"RESULT test_accuracy={accuracy:.4f} time_s={time.perf_counter() - start:.1f}")


if __name__ == "__main__":
    main()
