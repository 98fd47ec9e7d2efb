"""Surname -> language of origin: a character-level many-to-one RNN on the names data set.

    python examples/names.py [--data ROOT] [--out DIR] [--epochs 15] [--hidden 128]
                             [--cell rnn|gru|lstm]

The names come from ``rnnfast.datasets.load("names", ROOT)``: ROOT/names/*.txt, one file per
language (``--data ../shared/data``), else $RNNFAST_DATA, the cache or a download. Characters
are one-hot vectors; the names go to ``training.fit`` as a ragged list, so each
batch is padded by fit and carries its names' lengths: the RNN's output is each name's state
after its own last letter, and a Dense layer maps it to the 18 languages (``--cell gru`` or
``--cell lstm``: a GRU or LSTM instead of the Elman RNN). 80/20 split with a fixed seed, Adam, softmax cross-entropy. Prints the test
accuracy, draws a confusion matrix and saves the model into ``--out``, and ends with a line
``RESULT test_accuracy=... time_s=...`` (time_s: loading, training and testing, the work
bench/end_to_end/torch_names.py times; not the plot).

``--quantize bf16`` or ``--quantize int8``: the trained model is also quantized
(``rnnfast.quantize``), its summary (weight bytes) printed and its test accuracy added to the
RESULT line as ``quantized_test_accuracy=...``.
"""

from __future__ import annotations

import time

import _cli  # the examples' shared command line, beside this file
import numpy as np
from _tasks import flatten  # the task's data, as its twin in bench/ reads it

import rnnfast
from rnnfast import metrics, optim, training


def one_hot(name, alphabet):
    """(len(name), len(alphabet)) one-hot letters."""
    x = np.zeros((len(name), len(alphabet)), dtype=np.float32)
    x[np.arange(len(name)), [alphabet[c] for c in name]] = 1.0
    return x


def confusion_plot(truth, predicted, languages, path):
    plt = _cli.pyplot("confusion plot")
    if plt is None:
        return
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
    _cli.save_figure(fig, path, "confusion matrix")


def main(argv=None):
    parser = _cli.parser(__doc__)
    _cli.add_data(parser, "names")
    _cli.add_out(parser)
    _cli.add_quantize(parser)
    _cli.add_cell(parser)
    parser.add_argument("--epochs", type=int, default=15, help="passes over the training set")
    parser.add_argument("--hidden", type=int, default=128, help="hidden units of the RNN")
    parser.add_argument("--batch-size", type=int, default=32, help="names per batch")
    parser.add_argument("--lr", type=float, default=2e-3, help="Adam's learning rate")
    parser.add_argument(
        "--seed", type=int, default=0, help="seed of the split, the weights and the batch order"
    )
    args = parser.parse_args(argv)
    out = _cli.out_dir(parser, args.out)

    start = time.perf_counter()
    names, labels, languages = flatten(_cli.load(parser, "names", args.data))
    alphabet = {c: i for i, c in enumerate(sorted(set("".join(names))))}
    rng = np.random.default_rng(args.seed)
    order = rng.permutation(len(names))
    split = int(0.8 * len(names))
    train_idx, test_idx = order[:split], order[split:]
    letters = [one_hot(name, alphabet) for name in names]  # ragged: fit pads each batch
    model = rnnfast.Sequential(
        [
            _cli.recurrent(
                args.cell,
                len(alphabet),
                args.hidden,
                batch_first=True,
                return_sequences=False,
                seed=args.seed,
            ),
            rnnfast.Dense(args.hidden, len(languages), seed=args.seed + 1),
        ]
    )
    _cli.check_quantizable(parser, model, args.quantize)
    clock = _cli.EpochClock()
    training.fit(
        model,
        [letters[i] for i in train_idx],
        labels[train_idx],
        loss="cross_entropy",
        optimizer=optim.Adam(model, lr=args.lr),
        epochs=args.epochs,
        batch_size=args.batch_size,
        seed=args.seed,
        callbacks=[clock],
    )
    test_letters = [letters[i] for i in test_idx]
    logits = training.predict(model, test_letters, batch_size=512)
    accuracy = metrics.accuracy(logits, labels[test_idx])
    print(f"test accuracy {accuracy:.4f} on {len(test_idx)} names")
    _cli.print_epoch_times(clock.seconds)
    elapsed = time.perf_counter() - start  # the PyTorch twin's work; it draws no plot
    confusion_plot(labels[test_idx], logits.argmax(axis=1), languages, out / "names_confusion.png")
    model.save(out / "names.npz")
    print(f"model saved to {out / 'names.npz'}")
    result = f"test_accuracy={accuracy:.4f}"
    if args.quantize:
        qlogits = training.predict(
            _cli.quantized(model, args.quantize), test_letters, batch_size=512
        )
        q_accuracy = metrics.accuracy(qlogits, labels[test_idx])
        print(f"quantized ({args.quantize}) test accuracy {q_accuracy:.4f}")
        result += f" quantized_test_accuracy={q_accuracy:.4f}"
    print(f"RESULT {result} time_s={elapsed:.1f}")


if __name__ == "__main__":
    main()
