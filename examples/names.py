"""Surname -> language of origin: a character-level many-to-one RNN on ../shared/data/names.

    python examples/names.py [--data DIR] [--epochs 15] [--hidden 128] [--plot names.png]

Characters are one-hot vectors; each padded batch carries its names' lengths, so the RNN's
output is each name's state after its own last letter; a Dense layer maps it to the 18
languages. 80/20 split with a fixed seed, Adam, softmax cross-entropy. Prints the test
accuracy, draws a confusion matrix, and ends with a line ``RESULT test_accuracy=... time_s=...``
(time_s: loading, training and testing, the work bench/torch_names.py times; not the plot).
"""

from __future__ import annotations

import argparse
import time
import unicodedata
from pathlib import Path

import numpy as np

import rnnfast
from rnnfast import losses, metrics, optim

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "names"


def ascii_letters(name):
    """The name without accents (Ślusàrski -> Slusarski), as the classic tutorial does."""
    return "".join(c for c in unicodedata.normalize("NFD", name)
                   if unicodedata.category(c) != "Mn")


def load_names(directory):
    """(names, language index per name, language names), one file per language."""
    names, labels, languages = [], [], []
    for i, path in enumerate(sorted(Path(directory).glob("*.txt"))):
        languages.append(path.stem)
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                names.append(ascii_letters(line.strip()))
                labels.append(i)
    return names, np.array(labels), languages


def one_hot_batch(names, alphabet):
    """(B, T, len(alphabet)) one-hot letters, zero-padded, and the lengths (B,)."""
    lengths = np.array([len(n) for n in names])
    x = np.zeros((len(names), lengths.max(), len(alphabet)), dtype=np.float32)
    # one scatter for the whole batch: (name, position, letter) of every letter
    rows = np.repeat(np.arange(len(names)), lengths)
    positions = np.arange(lengths.sum()) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    x[rows, positions, [alphabet[c] for name in names for c in name]] = 1.0
    return x, lengths


class NameClassifier:
    """RNN (many-to-one, each name's own last state) -> Dense over the languages."""

    def __init__(self, n_letters, hidden, n_languages, seed):
        self.rnn = rnnfast.RNN(n_letters, hidden, batch_first=True, return_sequences=False,
                               seed=seed)
        self.dense = rnnfast.Dense(hidden, n_languages, seed=seed + 1)
        self.layers = [self.rnn, self.dense]

    def __call__(self, x, lengths):
        return self.dense(self.rnn(x, lengths=lengths))

    def backward(self, d_logits):
        self.rnn.backward(self.dense.backward(d_logits))

    # the optimizers' view: parameters and gradients of both layers
    def named_parameters(self):
        return [(f"{i}.{k}", v) for i, l in enumerate(self.layers) for k, v in l.named_parameters()]

    @property
    def grads(self):
        return {f"{i}.{k}": v for i, l in enumerate(self.layers) for k, v in l.grads.items()}

    def zero_grad(self):
        for layer in self.layers:
            layer.zero_grad()

    def train(self, mode=True):
        for layer in self.layers:
            layer.train(mode)


def predict(model, names, alphabet, batch_size=512):
    model.train(False)
    out = [model(*one_hot_batch(names[i:i + batch_size], alphabet))
           for i in range(0, len(names), batch_size)]
    return np.concatenate(out)


def confusion_plot(truth, predicted, languages, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    k = len(languages)
    confusion = np.zeros((k, k))
    np.add.at(confusion, (truth, predicted), 1)
    confusion /= np.maximum(confusion.sum(axis=1, keepdims=True), 1)
    fig, ax = plt.subplots(figsize=(8, 7))
    im = ax.imshow(confusion, cmap="Blues", vmin=0, vmax=1)
    ax.set_xticks(range(k), languages, rotation=90)
    ax.set_yticks(range(k), languages)
    ax.set_xlabel("predicted")
    ax.set_ylabel("true language")
    ax.set_title("rnnfast names: confusion matrix (rows sum to 1)")
    fig.colorbar(im)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    print(f"confusion matrix written to {path}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--plot", type=Path, default=Path("names_confusion.png"))
    args = parser.parse_args(argv)
    from tqdm import tqdm

    start = time.perf_counter()
    names, labels, languages = load_names(args.data)
    alphabet = {c: i for i, c in enumerate(sorted(set("".join(names))))}
    rng = np.random.default_rng(args.seed)
    order = rng.permutation(len(names))
    split = int(0.8 * len(names))
    train_idx, test_idx = order[:split], order[split:]
    model = NameClassifier(len(alphabet), args.hidden, len(languages), args.seed)
    optimizer = optim.Adam(model, lr=args.lr)
    for epoch in range(args.epochs):
        model.train()
        batches = np.array_split(rng.permutation(train_idx), len(train_idx) // args.batch_size)
        bar = tqdm(batches, desc=f"epoch {epoch + 1}/{args.epochs}", unit="batch")
        total, seen, tick = 0.0, 0, time.perf_counter()
        for batch in bar:
            x, lengths = one_hot_batch([names[i] for i in batch], alphabet)
            model.zero_grad()
            loss, d_logits = losses.cross_entropy(model(x, lengths), labels[batch])
            model.backward(d_logits)
            optimizer.step()
            total, seen = total + loss * len(batch), seen + len(batch)
            bar.set_postfix(loss=f"{total / seen:.3f}",
                            names_per_s=f"{seen / (time.perf_counter() - tick):,.0f}")
    logits = predict(model, [names[i] for i in test_idx], alphabet)
    accuracy = metrics.accuracy(logits, labels[test_idx])
    print(f"test accuracy {accuracy:.4f} on {len(test_idx)} names")
    elapsed = time.perf_counter() - start  # the PyTorch twin's work; it draws no plot
    confusion_plot(labels[test_idx], logits.argmax(axis=1), languages, args.plot)
    print(f"RESULT test_accuracy={accuracy:.4f} time_s={elapsed:.1f}")


if __name__ == "__main__":
    main()
