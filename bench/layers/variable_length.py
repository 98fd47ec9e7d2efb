"""What the variable-length path of ``training.fit`` costs over a training loop written by hand,
per epoch, in one process.

Two tasks, each trained one epoch at a time by both paths on the same batches (the same
shuffled order, no bucketing), the paths alternating, medians of the epoch times and of their
ratios:

- names (many-to-one): one-hot names of the names data set (``--data ROOT``: the datasets
  root, default rnnfast.datasets' lookup) ->
  RNN(return_sequences=False) -> Dense. By hand: pad each batch, ``rnn(x, lengths=...)``,
  cross-entropy, backward, Adam. fit: ``Sequential`` on the ragged list.
- tagging (many-to-many): token ids -> Embedding -> bidirectional RNN -> Dense per step,
  synthetic sentences of 5-40 tokens. By hand: pad, the Embedding and RNN with lengths (fused
  when Sequential would fuse them), cross-entropy with lengths, backward. fit: ``Sequential`` with
  ``Embedding(mask_zero=True)`` on the ragged list.

    python -m bench.layers.variable_length [--epochs 5] [--data ROOT]

Prints a table and the ISA; no assertion.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np

import rnnfast
from rnnfast import datasets, losses, optim, training
from rnnfast.nn.sequential import embedding_feeds_rnn


def names_data(root):
    xs, labels = [], []
    text = datasets.load("names", root)
    alphabet = {
        c: i for i, c in enumerate(sorted({c for ws in text.values() for w in ws for c in w}))
    }
    for label, lang in enumerate(text):
        for w in text[lang]:
            x = np.zeros((len(w), len(alphabet)), dtype=np.float32)
            x[np.arange(len(w)), [alphabet[c] for c in w]] = 1
            xs.append(x)
            labels.append(label)
    return xs, np.array(labels), len(alphabet), len(text)


def tagging_data(rng, n=3000, vocab=2000, tags=17):
    lengths = rng.integers(5, 41, n)
    xs = [rng.integers(1, vocab, k) for k in lengths]
    ys = [(x * 7) % tags for x in xs]
    return xs, ys, vocab, tags


def pad(seqs, dtype):
    lengths = np.array([len(s) for s in seqs])
    out = np.zeros((len(seqs), lengths.max()) + seqs[0].shape[1:], dtype=dtype)
    for b, s in enumerate(seqs):
        out[b, : len(s)] = s
    return out, lengths


class Batches:
    """The same shuffled batches for both paths: fit's order for a given seed."""

    def __init__(self, n, batch_size, seed):
        rng = np.random.default_rng(seed)
        order = rng.permutation(n)
        self.batches = [order[i : i + batch_size] for i in range(0, n, batch_size)]


def names_by_hand(model, opt, xs, labels, batches):
    rnn, dense = model.layers
    model.train()
    for index in batches:
        x, lengths = pad([xs[i] for i in index], np.float32)
        model.zero_grad()
        logits = dense(rnn(x, lengths=lengths))
        _, d = losses.cross_entropy(logits, labels[index])
        rnn.backward(dense.backward(d))
        opt.step()


def tagging_by_hand(model, opt, xs, ys, batches):
    emb, rnn, dense = model.layers
    model.train()
    for index in batches:
        ids, lengths = pad([xs[i] for i in index], np.int64)
        tags, _ = pad([ys[i] for i in index], np.int64)
        model.zero_grad()
        fused = embedding_feeds_rnn(emb, rnn, ids)  # Sequential's choice, made the same way
        y = rnn(ids, lengths=lengths, embedding=emb) if fused else rnn(emb(ids), lengths=lengths)
        logits = dense(y)
        _, d = losses.cross_entropy(logits, tags, lengths=lengths, batch_first=True)
        dx, _ = rnn.backward(dense.backward(d))
        if not fused:
            emb.backward(dx)
        opt.step()


def measure(label, make_model, by_hand, xs, ys, epochs, batch_size):
    models = {"hand": make_model(), "fit": make_model()}
    opts = {k: optim.Adam(m, lr=1e-3) for k, m in models.items()}
    times = {"hand": [], "fit": []}
    for epoch in range(epochs + 1):  # epoch 0 warms both up
        for path in ("hand", "fit"):
            # fit draws its order from default_rng(seed); the hand loop gets the same batches
            batches = Batches(len(xs), batch_size, epoch).batches
            start = time.perf_counter()
            if path == "hand":
                by_hand(models[path], opts[path], xs, ys, batches)
            else:
                training.fit(
                    models[path],
                    xs,
                    ys,
                    loss="cross_entropy",
                    optimizer=opts[path],
                    epochs=1,
                    batch_size=batch_size,
                    seed=epoch,
                    verbose=False,
                )
            if epoch:
                times[path].append(time.perf_counter() - start)
    ratios = [f / h for f, h in zip(times["fit"], times["hand"])]
    print(
        f"| {label} | {statistics.median(times['hand']):.3f} | "
        f"{statistics.median(times['fit']):.3f} | {statistics.median(ratios):.3f} | "
        f"{min(ratios):.3f}-{max(ratios):.3f} |"
    )


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument("--epochs", type=int, default=5, help="timed epochs per path")
    parser.add_argument(
        "--data",
        type=Path,
        default=None,
        help="the datasets root (default: rnnfast.datasets' lookup)",
    )
    parser.add_argument("--batch-size", type=int, default=32, help="sequences per batch")
    args = parser.parse_args(argv)
    print(
        f"rnnfast {rnnfast.__version__}, ISA {rnnfast._core.active_isa()}, "
        f"{rnnfast.get_num_threads()} threads"
    )
    print(
        "| task | hand-written loop, s/epoch | Sequential + fit, s/epoch | fit / hand "
        "(median) | range |"
    )
    print("|---|---:|---:|---:|---|")
    xs, labels, letters, languages = names_data(args.data)
    measure(
        "names (many-to-one, H=128)",
        lambda: rnnfast.Sequential(
            [
                rnnfast.RNN(letters, 128, batch_first=True, return_sequences=False, seed=0),
                rnnfast.Dense(128, languages, seed=1),
            ]
        ),
        names_by_hand,
        xs,
        labels,
        args.epochs,
        args.batch_size,
    )
    rng = np.random.default_rng(0)
    ts, tags, vocab, n_tags = tagging_data(rng)
    measure(
        "tagging (bidirectional, many-to-many, H=128)",
        lambda: rnnfast.Sequential(
            [
                rnnfast.Embedding(vocab, 64, mask_zero=True, seed=0),
                rnnfast.RNN(
                    64, 128, bidirectional=True, batch_first=True, return_sequences=True, seed=1
                ),
                rnnfast.Dense(256, n_tags, seed=2),
            ]
        ),
        tagging_by_hand,
        ts,
        tags,
        args.epochs,
        args.batch_size,
    )


if __name__ == "__main__":
    main()
