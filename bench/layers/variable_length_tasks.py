"""The issue's two NLP tasks, trained by a hand-written loop and by ``Sequential`` + ``fit`` on
ragged data, side by side in one process: test accuracy and seconds per epoch.

- polarity (many-to-one): sentence polarity v1.0 (Pang and Lee, 2005; rt-polarity.pos/.neg in
  ``--polarity DIR``), whitespace tokens, 80/10/10 split -> Embedding -> RNN(last output) ->
  Dense(2).
- tagging (many-to-many): a Universal Dependencies treebank (``--conllu DIR``, its
  *-ud-train/-test.conllu) -> Embedding -> bidirectional RNN -> Dense over the UPOS tags.

Both paths start from the same weights and see the same batches in the same order (fit's
seeded shuffle, no bucketing), so their accuracies should agree to rounding; the epochs of the
two paths alternate, and the table gives the median epoch time of each and the median of their
ratios. Also trains the path the issue found silently wrong (end-padded ids, no lengths) and
reports whether rnnfast now warns.

    python -m bench.layers.variable_length_tasks --polarity DIR --conllu DIR [--epochs 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np

import rnnfast
from rnnfast import losses, metrics, optim, training
from rnnfast.data import Vocabulary, pad_sequences, read_conllu
from rnnfast.nn.sequential import embedding_feeds_rnn


def split(n, seed=0):
    order = np.random.default_rng(seed).permutation(n)
    return np.split(order, [int(0.8 * n), int(0.9 * n)])


def polarity(directory):
    texts, labels = [], []
    for label, name in enumerate(("rt-polarity.neg", "rt-polarity.pos")):
        lines = (Path(directory) / name).read_text(encoding="utf-8", errors="replace").splitlines()
        texts += [line.split() for line in lines if line.strip()]
        labels += [label] * sum(1 for line in lines if line.strip())
    train, _, test = split(len(texts))
    vocab = Vocabulary.build([texts[i] for i in train], min_count=2)
    ids = vocab.encode_batch(texts)
    labels = np.array(labels)
    return (
        [ids[i] for i in train],
        labels[train],
        [ids[i] for i in test],
        labels[test],
        len(vocab),
        2,
    )


def tagging(directory):
    train = read_conllu(next(Path(directory).glob("*-ud-train.conllu")))
    test = read_conllu(next(Path(directory).glob("*-ud-test.conllu")))
    words = Vocabulary.build([s.forms for s in train], min_count=2)
    tags = Vocabulary.build([s.upos for s in train + test], pad=None, unk=None)
    return (
        [words.encode(s.forms) for s in train],
        [tags.encode(s.upos) for s in train],
        [words.encode(s.forms) for s in test],
        [tags.encode(s.upos) for s in test],
        len(words),
        len(tags),
    )


def build(vocab, classes, per_step, mask_zero=True):
    """Embedding -> RNN -> Dense; the same weights for every seed-0 build."""
    hidden = 128
    return rnnfast.Sequential(
        [
            rnnfast.Embedding(vocab, 100, mask_zero=mask_zero, seed=0),
            rnnfast.RNN(
                100,
                hidden,
                batch_first=True,
                bidirectional=per_step,
                return_sequences=per_step,
                seed=1,
            ),
            rnnfast.Dense(hidden * (2 if per_step else 1), classes, seed=2),
        ]
    )


def hand_epoch(model, opt, xs, ys, per_step, rng, batch_size):
    """One epoch written by hand: pad each batch, the layers called with the lengths."""
    emb, rnn, dense = model.layers
    model.train()
    order = rng.permutation(len(xs))
    for start in range(0, len(xs), batch_size):
        index = order[start : start + batch_size]
        ids, lengths = pad_sequences([xs[i] for i in index], batch_first=True, dtype=np.int64)
        model.zero_grad()
        fused = embedding_feeds_rnn(emb, rnn, ids)
        y = rnn(ids, lengths=lengths, embedding=emb) if fused else rnn(emb(ids), lengths=lengths)
        logits = dense(y)
        if per_step:
            tags, _ = pad_sequences([ys[i] for i in index], batch_first=True, dtype=np.int64)
            _, d = losses.cross_entropy(logits, tags, lengths=lengths, batch_first=True)
        else:
            _, d = losses.cross_entropy(logits, ys[index])
        dx, _ = rnn.backward(dense.backward(d))
        if not fused:
            emb.backward(dx)
        opt.step()


def hand_accuracy(model, xs, ys, per_step):
    model.eval()
    hits = counted = 0
    for start in range(0, len(xs), 256):
        chunk = xs[start : start + 256]
        ids, lengths = pad_sequences(chunk, batch_first=True, dtype=np.int64)
        emb, rnn, dense = model.layers
        logits = dense(rnn(emb(ids), lengths=lengths))
        if per_step:
            tags, _ = pad_sequences(ys[start : start + 256], batch_first=True, dtype=np.int64)
            h, c = metrics.accuracy_counts(logits, tags, lengths=lengths, batch_first=True)
        else:
            h, c = metrics.accuracy_counts(logits, ys[start : start + 256])
        hits, counted = hits + h, counted + c
    return hits / counted


def run(task, data, epochs, batch_size):
    xs, ys, xt, yt, vocab, classes = data
    per_step = task == "tagging"
    models = {"hand": build(vocab, classes, per_step), "fit": build(vocab, classes, per_step)}
    opts = {k: optim.Adam(m, lr=2e-3) for k, m in models.items()}
    # fit shuffles with default_rng(seed).permutation each epoch; a Generator as the seed goes on
    # from one fit call to the next, so both paths see the same batches in every epoch
    hand_rng, fit_rng = np.random.default_rng(0), np.random.default_rng(0)
    times = {"hand": [], "fit": []}
    for _ in range(epochs):
        start = time.perf_counter()
        hand_epoch(models["hand"], opts["hand"], xs, ys, per_step, hand_rng, batch_size)
        times["hand"].append(time.perf_counter() - start)
        start = time.perf_counter()
        training.fit(
            models["fit"],
            xs,
            ys,
            loss="cross_entropy",
            optimizer=opts["fit"],
            epochs=1,
            batch_size=batch_size,
            seed=fit_rng,
            verbose=False,
        )
        times["fit"].append(time.perf_counter() - start)
    acc_hand = hand_accuracy(models["hand"], xt, yt, per_step)
    acc_fit = training.evaluate(models["fit"], xt, yt, loss="cross_entropy", metrics=["accuracy"])[
        "accuracy"
    ]
    ratios = [f / h for f, h in zip(times["fit"][1:], times["hand"][1:])] or [
        times["fit"][0] / times["hand"][0]
    ]
    print(
        f"| {task} | {acc_hand:.4f} | {acc_fit:.4f} | {statistics.median(times['hand']):.2f} | "
        f"{statistics.median(times['fit']):.2f} | {statistics.median(ratios):.3f} |"
    )


def trap(data):
    """The path the issue found silently wrong: end-padded ids through a plain Embedding."""
    xs, ys, _, _, vocab, classes = data
    padded, _ = pad_sequences(xs, batch_first=True, dtype=np.int64)
    model = build(vocab, classes, per_step=False, mask_zero=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        training.fit(
            model,
            padded[:256],
            ys[:256],
            loss="cross_entropy",
            optimizer=optim.Adam(model),
            epochs=1,
            verbose=False,
        )
    names = sorted({type(w.message).__name__ for w in caught})
    print(f"end-padded ids without lengths: warnings {names or 'none'}")


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument("--polarity", type=Path, help="folder of rt-polarity.pos/.neg")
    parser.add_argument("--conllu", type=Path, help="a UD treebank folder")
    parser.add_argument("--epochs", type=int, default=5, help="epochs per path")
    parser.add_argument("--batch-size", type=int, default=32, help="sequences per batch")
    args = parser.parse_args(argv)
    if args.polarity is None and args.conllu is None:
        parser.error("give --polarity DIR and/or --conllu DIR")
    print(
        f"rnnfast {rnnfast.__version__}, ISA {rnnfast._core.active_isa()}, "
        f"{rnnfast.get_num_threads()} threads, python {sys.version.split()[0]}"
    )
    print("| task | hand loop accuracy | fit accuracy | hand s/epoch | fit s/epoch | fit / hand |")
    print("|---|---:|---:|---:|---:|---:|")
    if args.polarity is not None:
        data = polarity(args.polarity)
        run("polarity", data, args.epochs, args.batch_size)
    if args.conllu is not None:
        run("tagging", tagging(args.conllu), args.epochs, args.batch_size)
    if args.polarity is not None:
        trap(data)


if __name__ == "__main__":
    main()
