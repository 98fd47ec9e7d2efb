"""PyTorch twin of examples/names.py: same names, split, batches, one-hot encoding, model,
optimiser and epochs, for comparing end-to-end training time and accuracy.

    python -m bench.end_to_end.torch_names [--data ROOT] [--epochs 15] [--hidden 128]
                                           [--cell rnn|gru|lstm] [--threads 2]

``--data ROOT`` as the example's: the datasets root (default: rnnfast.datasets' lookup).

Each padded batch goes through ``pack_padded_sequence``, so ``h_n`` is each name's state after
its own last letter (what rnnfast's ``lengths`` gives); ``--cell gru`` or ``lstm``: a GRU or
LSTM in the RNN's place, as the example's ``--cell``. Prints the seconds of each epoch as the
example does, and ends with ``RESULT test_accuracy=... time_s=...`` as the rnnfast example.
"""

from __future__ import annotations

import time

import numpy as np
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence

from bench.end_to_end import _twin
from examples._tasks import flatten
from rnnfast import datasets


def one_hot_batch(names, alphabet):
    """(B, T, len(alphabet)) one-hot letters, zero-padded, and the lengths (B,)."""
    lengths = np.array([len(n) for n in names])
    x = np.zeros((len(names), lengths.max(), len(alphabet)), dtype=np.float32)
    # one scatter for the whole batch: (name, position, letter) of every letter
    rows = np.repeat(np.arange(len(names)), lengths)
    positions = np.arange(lengths.sum()) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    x[rows, positions, [alphabet[c] for name in names for c in name]] = 1.0
    return x, lengths


class NameClassifier(nn.Module):
    def __init__(self, n_letters, hidden, n_languages, cell="rnn"):
        super().__init__()
        self.rnn = _twin.recurrent(cell, n_letters, hidden, batch_first=True)
        self.dense = nn.Linear(hidden, n_languages)

    def forward(self, x, lengths):
        packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        _, state = self.rnn(packed)
        return self.dense(_twin.hidden(state)[-1])


def batch_tensors(names, alphabet):
    x, lengths = one_hot_batch(names, alphabet)
    return torch.from_numpy(x), torch.from_numpy(lengths)


def main(argv=None):
    args = _twin.parse_args(
        __doc__, argv, epochs=15, options={"--hidden": 128, "--batch-size": 32, "--lr": 2e-3}
    )
    start = _twin.start(args)
    names, labels, languages = flatten(datasets.load("names", args.data))
    alphabet = {c: i for i, c in enumerate(sorted(set("".join(names))))}
    rng = np.random.default_rng(args.seed)
    order = rng.permutation(len(names))
    split = int(0.8 * len(names))
    train_idx, test_idx = order[:split], order[split:]
    targets = torch.from_numpy(labels)
    model = NameClassifier(len(alphabet), args.hidden, len(languages), args.cell)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    loss_fn = nn.CrossEntropyLoss()
    clock = _twin.EpochClock()
    for epoch in range(args.epochs):
        model.train()
        batches = np.array_split(rng.permutation(train_idx), len(train_idx) // args.batch_size)
        bar = _twin.progress(batches, f"epoch {epoch + 1}/{args.epochs}")
        total, seen = 0.0, 0
        for batch in bar:
            x, lengths = batch_tensors([names[i] for i in batch], alphabet)
            optimizer.zero_grad()
            loss = loss_fn(model(x, lengths), targets[batch])
            loss.backward()
            optimizer.step()
            total, seen = total + loss.item() * len(batch), seen + len(batch)
            bar.set_postfix(loss=f"{total / seen:.3f}")
        clock.lap()
    model.eval()
    test_names = [names[i] for i in test_idx]
    with torch.no_grad():
        logits = torch.cat(
            [
                model(*batch_tensors(test_names[i : i + 512], alphabet))
                for i in range(0, len(test_names), 512)
            ]
        )
    accuracy = float((logits.argmax(1).numpy() == labels[test_idx]).mean())
    print(f"test accuracy {accuracy:.4f} on {len(test_idx)} names")
    _twin.print_epoch_times(clock.seconds)
    print(f"RESULT test_accuracy={accuracy:.4f} time_s={time.perf_counter() - start:.1f}")


if __name__ == "__main__":
    main()
