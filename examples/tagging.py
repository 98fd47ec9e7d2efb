"""Part-of-speech tagging: a bidirectional word-level RNN on a Universal Dependencies treebank.

    python examples/tagging.py --data UD_English-EWT [--out DIR] [--epochs 10] [--hidden 128]
                               [--cell rnn|gru|lstm]

``--data`` is a UD treebank's folder (its ``*-ud-train.conllu`` and ``*-ud-test.conllu``, and
``*-ud-dev.conllu`` for validation when there is one) or a single CoNLL-U file, split 80/10/10
into train / dev / test with a fixed seed (the same split whatever ``--seed``). Words seen
fewer than ``--min-count`` times in training become ``<unk>``, so the model learns a vector
for the words it will not know at test time. Each sentence's word ids go to ``training.fit``
as a ragged list with its universal tags (UPOS) as per-step targets: fit pads each batch of
similar lengths (``bucket=True``), ``Embedding(mask_zero=True)`` marks the padding, the RNN
runs each sentence to its own length in both directions, and neither the loss nor the
accuracy counts a padded step (``--cell gru`` or ``--cell lstm``: a bidirectional GRU or
LSTM instead of the Elman RNN). Adam, softmax cross-entropy per word. Prints the token
accuracy on the test split, saves the model and its vocabularies into ``--out``, and ends with
a line ``RESULT test_accuracy=... time_s=...`` (time_s: loading, training and testing).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import _cli  # the examples' shared command line, beside this file
from _tasks import load_splits  # the task's data, as its twin in bench/ reads it

import rnnfast
from rnnfast import optim, training
from rnnfast.data import Vocabulary


def main(argv=None):
    parser = _cli.parser(__doc__)
    parser.add_argument(
        "--data",
        type=Path,
        required=True,
        default=argparse.SUPPRESS,
        help="a UD treebank folder (*-ud-train/-dev/-test.conllu) or one CoNLL-U "
        "file, split 80/10/10",
    )
    _cli.add_out(parser)
    _cli.add_cell(parser)
    parser.add_argument("--epochs", type=int, default=10, help="passes over the training set")
    parser.add_argument(
        "--hidden", type=int, default=128, help="hidden units of each direction of the RNN"
    )
    parser.add_argument("--embed", type=int, default=100, help="size of the word vectors")
    parser.add_argument("--batch-size", type=int, default=32, help="sentences per batch")
    parser.add_argument("--lr", type=float, default=2e-3, help="Adam's learning rate")
    parser.add_argument(
        "--min-count", type=int, default=2, help="training words seen fewer times become <unk>"
    )
    parser.add_argument(
        "--seed", type=int, default=0, help="seed of the weights and the batch order"
    )
    args = parser.parse_args(argv)
    out = _cli.out_dir(parser, args.out)

    start = time.perf_counter()
    try:
        train, dev, test = load_splits(args.data)
    except (OSError, ValueError) as exc:
        _cli.fail(parser, f"--data: {exc}")
    words = Vocabulary.build([s.forms for s in train], min_count=args.min_count)  # <pad> = 0
    tags = Vocabulary.build([s.upos for s in train + dev + test], pad=None, unk=None)
    x_train, x_dev, x_test = (words.encode_batch([s.forms for s in p]) for p in (train, dev, test))
    y_train, y_dev, y_test = (tags.encode_batch([s.upos for s in p]) for p in (train, dev, test))
    print(
        f"{len(train)} / {len(dev)} / {len(test)} sentences (train / dev / test), "
        f"{len(words)} words, {len(tags)} tags"
    )
    model = rnnfast.Sequential(
        [
            rnnfast.Embedding(len(words), args.embed, mask_zero=True, seed=args.seed),
            _cli.recurrent(
                args.cell,
                args.embed,
                args.hidden,
                bidirectional=True,
                batch_first=True,
                return_sequences=True,
                seed=args.seed + 1,
            ),
            rnnfast.Dense(2 * args.hidden, len(tags), seed=args.seed + 2),
        ]
    )
    clock = _cli.EpochClock()
    training.fit(
        model,
        x_train,
        y_train,
        loss="cross_entropy",
        optimizer=optim.Adam(model, lr=args.lr),
        metrics=["accuracy"],
        epochs=args.epochs,
        batch_size=args.batch_size,
        bucket=True,
        seed=args.seed,
        validation_data=(x_dev, y_dev) if dev else None,
        callbacks=[clock],
    )
    accuracy = training.evaluate(model, x_test, y_test, loss="cross_entropy", metrics=["accuracy"])[
        "accuracy"
    ]
    print(f"test accuracy {accuracy:.4f} on {sum(map(len, test))} words")
    _cli.print_epoch_times(clock.seconds)
    elapsed = time.perf_counter() - start
    model.save(out / "tagging.npz")
    words.save(out / "tagging_words.json")
    tags.save(out / "tagging_tags.json")
    print(
        f"model and vocabularies saved to {out}/tagging.npz, tagging_words.json, tagging_tags.json"
    )
    print(f"RESULT test_accuracy={accuracy:.4f} time_s={elapsed:.1f}")


if __name__ == "__main__":
    main()
