"""The character language model of charlm.py, trained data-parallel on MPI ranks.

    mpiexec -n 2 python examples/distributed_charlm.py [--data ROOT] [--out DIR] [--epochs 2]

Needs ``pip install "rnnfast[mpi]"`` (mpi4py and MPICH). The model, data split and optimizer
are charlm.py's: Embedding(vocab, 64) -> RNN(64, 256, stateful) -> Linear(256, vocab), Adam with
gradient clipping, truncated BPTT over ``--batch-size`` parallel streams of the text. The
streams are shared out over the ranks (``rnnfast.distributed.fit_stream``): with N ranks each
trains on batch-size / N of them and the gradients are averaged before each step, so the run
takes the steps ``python examples/charlm.py`` takes with the same options, to float32
rounding, and reaches its validation perplexity. Each rank uses ``--threads`` rnnfast threads
(1 by default: one rank per core). Rank 0 alone prints, saves ``DIR/distributed_charlm.npz``
and ends with ``RESULT val_perplexity=... time_s=... ranks=N``.
"""

from __future__ import annotations

import math
import time

import _cli  # the examples' shared command line, beside this file
from charlm import build_model, encode_text  # the same model and data as charlm.py

import rnnfast
from rnnfast import distributed, optim


def main(argv=None):
    parser = _cli.parser(__doc__)
    _cli.add_data(parser, "tinyshakespeare")
    _cli.add_out(parser)
    parser.add_argument("--epochs", type=int, default=2, help="passes over the training text")
    parser.add_argument("--embed", type=int, default=64, help="size of the character vectors")
    parser.add_argument("--hidden", type=int, default=256, help="hidden units of the RNN")
    parser.add_argument(
        "--batch-size",
        type=int,
        default=32,
        help="parallel streams the training text is cut into, over all ranks (a multiple of "
        "the number of ranks)",
    )
    parser.add_argument(
        "--bptt",
        type=int,
        default=100,
        help="characters per window: the gradient stops at each window's start",
    )
    parser.add_argument("--lr", type=float, default=3e-3, help="Adam's learning rate")
    parser.add_argument("--clip", type=float, default=5.0, help="gradient norm clipped to this")
    parser.add_argument("--seed", type=int, default=0, help="seed of the weights")
    parser.add_argument("--threads", type=int, default=1, help="rnnfast threads per rank")
    args = parser.parse_args(argv)

    distributed.init()
    rank, size = distributed.rank(), distributed.size()
    if args.batch_size % size:
        _cli.fail(parser, f"--batch-size {args.batch_size}: not a multiple of the {size} ranks")
    out = _cli.out_dir(parser, args.out) if rank == 0 else args.out
    rnnfast.set_num_threads(args.threads)
    start = time.perf_counter()
    train_ids, val_ids, alphabet = encode_text(_cli.load(parser, "tinyshakespeare", args.data))
    if rank == 0:
        print(
            f"{len(train_ids):,} training and {len(val_ids):,} validation characters, "
            f"vocabulary {len(alphabet)}; {size} ranks x {args.batch_size // size} streams, "
            f"{args.threads} thread(s) each"
        )
    model = build_model(len(alphabet), args.embed, args.hidden, args.seed)
    optimizer = distributed.DistributedOptimizer(optim.Adam(model, lr=args.lr))
    history = distributed.fit_stream(
        model,
        train_ids,
        loss="cross_entropy",
        optimizer=optimizer,
        batch_size=args.batch_size // size,
        bptt=args.bptt,
        epochs=args.epochs,
        clip_norm=args.clip,
        validation_tokens=val_ids,
    )
    elapsed = time.perf_counter() - start
    optimizer.remove_hooks()
    waited = distributed.average(optimizer.wait_seconds)
    if rank == 0:
        for epoch, (lo, vl) in enumerate(zip(history["loss"], history["val_loss"])):
            print(
                f"epoch {epoch + 1}: train loss {lo:.4f} (perplexity {math.exp(lo):.3f}), "
                f"validation loss {vl:.4f} (perplexity {math.exp(vl):.3f})"
            )
        model.save(out / "distributed_charlm.npz")
        print(f"model saved to {out / 'distributed_charlm.npz'}")
        print(f"waiting for the gradient reductions: {waited:.2f} s per rank of {elapsed:.1f} s")
        val_ppl = math.exp(history["val_loss"][-1])
        print(f"RESULT val_perplexity={val_ppl:.4f} time_s={elapsed:.1f} ranks={size}")


if __name__ == "__main__":
    main()
