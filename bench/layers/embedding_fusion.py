"""Embedding -> RNN training step, fused (token input) against unfused, in one process.

The fused path (``rnn(ids, embedding=emb)``, what Sequential runs) projects the embedding table
once and gathers its rows, and sums the backward's deltas per id; the unfused one embeds the
batch (T*B rows), projects every row and scatters the input gradient back into the table. Both
are timed alternately, forward + backward of the layer pair, as medians, for a character
model's shape (vocabulary much smaller than the batch's tokens) and for a vocabulary as large
as the batch's tokens (where Sequential stops fusing).

    python -m bench.layers.embedding_fusion [--repeats 15] [--calls 10] [--threads 2]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import rnnfast

# (label, vocabulary, T, B, D, H): charlm's window, then a vocabulary the size of T * B
SHAPES = [
    ("charlm window", 65, 100, 32, 64, 256),
    ("vocab = T*B", 3200, 100, 32, 64, 256),
]


def step(emb, rnn, ids, dy, fused: bool):
    """One forward + backward of Embedding -> RNN (batch-first ids)."""
    if fused:
        rnn(ids, embedding=emb)
        rnn.backward(dy)
    else:
        rnn(emb(ids))
        dx, _ = rnn.backward(dy)
        emb.backward(dx)


def time_pair(shape, repeats: int, calls: int) -> dict:
    _, vocab, steps, batch, dim, hidden = shape
    rng = np.random.default_rng(0)
    emb = rnnfast.Embedding(vocab, dim, seed=0)
    rnn = rnnfast.RNN(dim, hidden, batch_first=True, seed=0)
    ids = rng.integers(0, vocab, (batch, steps))
    dy = rng.standard_normal((batch, steps, hidden)).astype(np.float32)
    samples = {True: [], False: []}
    for fused in (True, False):  # warm up both: caches, thread pool, page faults
        step(emb, rnn, ids, dy, fused)
    for _ in range(repeats):
        for fused in (True, False):
            start = time.perf_counter()
            for _ in range(calls):
                step(emb, rnn, ids, dy, fused)
            samples[fused].append((time.perf_counter() - start) / calls * 1e3)
    ratios = [f / u for f, u in zip(samples[True], samples[False])]
    return {
        "fused": statistics.median(samples[True]),
        "unfused": statistics.median(samples[False]),
        "ratio": statistics.median(ratios),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--calls", type=int, default=10, help="steps per timed sample")
    parser.add_argument("--threads", type=int, default=rnnfast.get_num_threads())
    args = parser.parse_args(argv)
    rnnfast.set_num_threads(args.threads)
    print(
        f"{args.threads} thread(s); medians of {args.repeats} alternating samples of "
        f"{args.calls} steps (forward + backward, float32)"
    )
    print(
        f"{'shape':<16}{'V':>6}{'T':>5}{'B':>4}{'D':>5}{'H':>5}{'fused ms':>10}"
        f"{'unfused ms':>12}{'fused/unfused':>15}"
    )
    for shape in SHAPES:
        r = time_pair(shape, args.repeats, args.calls)
        label, vocab, steps, batch, dim, hidden = shape
        print(
            f"{label:<16}{vocab:>6}{steps:>5}{batch:>4}{dim:>5}{hidden:>5}{r['fused']:>10.2f}"
            f"{r['unfused']:>12.2f}{r['ratio']:>15.2f}"
        )


if __name__ == "__main__":
    main()
