"""Character language model on the tinyshakespeare data set, trained by truncated BPTT.

    python examples/charlm.py [--data ROOT] [--out DIR] [--epochs 2] [--hidden 256]
                              [--cell rnn|gru|lstm]

The text comes from ``rnnfast.datasets.load("tinyshakespeare", ROOT)``:
ROOT/tinyshakespeare/input.txt (``--data ../shared/data``), else $RNNFAST_DATA, the cache or a
download. Embedding(vocab, 64) -> RNN(64, 256, stateful) -> Linear(256, vocab) (``--cell gru``
or ``--cell lstm``: a GRU or LSTM in the RNN's place). The first 90% of the text
is cut into 32 parallel streams read 100 characters at a time (``training.fit_stream``): the
RNN's state is carried from one window to the next while the gradient stops at each window's
start. Adam with gradient clipping. Prints the validation perplexity (last 10% of the text),
samples generated from a prompt by greedy, temperature and beam-search decoding, draws the
loss curves and saves the model into ``--out``, and ends with a line ``RESULT val_perplexity=... time_s=...`` (time_s: loading,
training, validation and decoding, the work bench/end_to_end/torch_charlm.py times; not the plot).

Data-parallel on MPI ranks (``pip install "rnnfast[mpi]"``)::

    mpiexec -n 2 python examples/charlm.py --distributed [the options above]

``--distributed`` shares the ``--batch-size`` streams out over the ranks
(``rnnfast.distributed.fit_stream``, ``--batch-size`` a multiple of the number of ranks): each
rank trains on batch-size / N of them and the gradients are averaged before each step, so the
run takes the steps of one process with the same options, to float32 rounding, and reaches its
validation perplexity. Each rank runs ``--threads`` rnnfast threads (1 when 0: one rank per
core). Rank 0 alone prints, decodes, plots (the training curve of its own streams) and saves;
its RESULT line ends with ``ranks=N``.

``--quantize bf16`` or ``--quantize int8``: the trained model is also quantized
(``rnnfast.quantize``), its summary (weight bytes) printed and its validation perplexity (the
same windows, the state carried) added to the RESULT line as ``quantized_val_perplexity=...``.
"""

from __future__ import annotations

import math
import time

import _cli  # the examples' shared command line, beside this file
import numpy as np
from _tasks import encode_text  # the task's data, as its twin in bench/ reads it

import rnnfast
from rnnfast import decoding, losses, optim, training


def build_model(vocab, embed, hidden, seed, cell="rnn"):
    return rnnfast.Sequential(
        [
            rnnfast.Embedding(vocab, embed, seed=seed),
            _cli.recurrent(
                cell,
                embed,
                hidden,
                batch_first=True,
                return_sequences=True,
                stateful=True,
                seed=seed + 1,
            ),
            rnnfast.Linear(hidden, vocab, seed=seed + 2),
        ]
    )


def make_step_fn(model):
    """The decoding view of the model: previous tokens (N,) and the recurrent state in (h
    (1, N, H), or the LSTM's pair (h, c): decoding reorders either), log-probabilities (N, V)
    and the next state out."""
    embedding, rnn, linear = model.layers

    def step_fn(tokens, h):
        out, h_next = rnn.step(embedding(tokens), h)
        return losses.log_softmax(linear(out)), _cli.copy_state(h_next)

    return step_fn


def prime(model, prompt_ids):
    """The recurrent state (batch of 1) after reading all but the prompt's last character."""
    embedding, rnn, _ = model.layers
    h = _cli.zero_state(rnn, 1, np.float32)
    for token in prompt_ids[:-1]:
        _, h = rnn.step(embedding(np.array([token])), h)
        h = _cli.copy_state(h)
    return h


def loss_plot(window_losses, history, windows_per_epoch, path):
    plt = _cli.pyplot("loss curves")
    if plt is None:
        return
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4))
    w = np.asarray(window_losses)
    k = 20
    smooth = np.convolve(w, np.ones(k) / k, mode="valid") if len(w) >= k else w
    ax.plot(np.arange(len(w)) + 1, w, color="0.8", lw=0.7, label="train (per window)")
    ax.plot(
        np.arange(len(smooth)) + (len(w) - len(smooth)) + 1,
        smooth,
        label=f"train ({k}-window mean)",
    )
    ends = windows_per_epoch * (np.arange(len(history["val_loss"])) + 1)
    ax.plot(ends, history["val_loss"], "o-", label="validation (end of epoch)")
    ax.set_xlabel("window (32 x 100 characters)")
    ax.set_ylabel("cross-entropy (nats / character)")
    ax.legend()
    epochs = np.arange(len(history["loss"])) + 1
    bx.plot(epochs, np.exp(history["loss"]), "o-", label="train (epoch mean)")
    bx.plot(epochs, np.exp(history["val_loss"]), "o-", label="validation")
    bx.set_xlabel("epoch")
    bx.set_ylabel("perplexity")
    bx.set_xticks(epochs)
    bx.legend()
    fig.suptitle("rnnfast character language model, tiny Shakespeare")
    _cli.save_figure(fig, path, "loss curves")


def main(argv=None):
    parser = _cli.parser(__doc__)
    _cli.add_data(parser, "tinyshakespeare")
    _cli.add_out(parser)
    _cli.add_quantize(parser)
    _cli.add_cell(parser)
    parser.add_argument("--epochs", type=int, default=2, help="passes over the training text")
    parser.add_argument("--embed", type=int, default=64, help="size of the character vectors")
    parser.add_argument("--hidden", type=int, default=256, help="hidden units of the RNN")
    parser.add_argument(
        "--batch-size", type=int, default=32, help="parallel streams the training text is cut into"
    )
    parser.add_argument(
        "--bptt",
        type=int,
        default=100,
        help="characters per window: the gradient stops at each window's start",
    )
    parser.add_argument("--lr", type=float, default=3e-3, help="Adam's learning rate")
    parser.add_argument("--clip", type=float, default=5.0, help="gradient norm clipped to this")
    parser.add_argument("--seed", type=int, default=0, help="seed of the weights and sampling")
    parser.add_argument(
        "--threads",
        type=int,
        default=0,
        help="rnnfast threads (0: the library's default, the cores available)",
    )
    parser.add_argument("--prompt", default="ROMEO:\n", help="the text the samples continue")
    parser.add_argument("--length", type=int, default=200, help="characters to generate")
    parser.add_argument("--beam-width", type=int, default=4, help="beams of the beam search")
    parser.add_argument(
        "--temperature", type=float, default=0.8, help="temperature of the sampled text"
    )
    parser.add_argument(
        "--distributed",
        action="store_true",
        help="data-parallel on the MPI ranks of mpiexec: the streams shared out over them",
    )
    args = parser.parse_args(argv)
    rank, size = 0, 1
    if args.distributed:
        from rnnfast import distributed

        distributed.init()
        rank, size = distributed.rank(), distributed.size()
        if args.batch_size % size:
            _cli.fail(parser, f"--batch-size {args.batch_size}: not a multiple of {size} ranks")
    out = _cli.out_dir(parser, args.out) if rank == 0 else args.out

    if args.threads or args.distributed:
        rnnfast.set_num_threads(args.threads or 1)
    start = time.perf_counter()
    train_ids, val_ids, alphabet = encode_text(_cli.load(parser, "tinyshakespeare", args.data))
    if rank == 0:
        print(
            f"{len(train_ids):,} training and {len(val_ids):,} validation characters, "
            f"vocabulary {len(alphabet)}"
            + (f"; {size} ranks x {args.batch_size // size} streams" if args.distributed else "")
        )
    index = {c: i for i, c in enumerate(alphabet)}
    prompt_ids = [index[c] for c in args.prompt if c in index]
    if not prompt_ids:
        _cli.fail(parser, f"--prompt {args.prompt!r}: none of its characters is in the text")
    model = build_model(len(alphabet), args.embed, args.hidden, args.seed, args.cell)
    _cli.check_quantizable(parser, model, args.quantize)
    optimizer = optim.Adam(model, lr=args.lr)

    window_losses = []

    def recorded_loss(logits, targets):  # the fused loss, remembering each training window's
        value, grad = losses.cross_entropy(logits, targets)
        if model.training:
            window_losses.append(value)
        return value, grad

    clock = _cli.EpochClock()
    history = (distributed.fit_stream if args.distributed else training.fit_stream)(
        model,
        train_ids,
        loss=recorded_loss,
        optimizer=optimizer,
        batch_size=args.batch_size // size,
        bptt=args.bptt,
        epochs=args.epochs,
        clip_norm=args.clip,
        validation_tokens=val_ids,
        callbacks=[clock],
    )
    train_time = time.perf_counter() - start
    if rank != 0:
        return
    val_ppl = math.exp(history["val_loss"][-1])
    for epoch, (lo, vl) in enumerate(zip(history["loss"], history["val_loss"])):
        print(
            f"epoch {epoch + 1}: train loss {lo:.4f} (perplexity {math.exp(lo):.3f}), "
            f"validation loss {vl:.4f} (perplexity {math.exp(vl):.3f})"
        )
    _cli.print_epoch_times(clock.seconds)

    model.eval()
    step_fn = make_step_fn(model)
    h = prime(model, prompt_ids)
    last = prompt_ids[-1]

    def text_of(ids):
        return "".join(alphabet[i] for i in ids)

    samples = {
        "greedy": decoding.greedy_decode(step_fn, h, last, args.length)[0][0],
        f"temperature {args.temperature}": decoding.sample_decode(
            step_fn, h, last, args.length, temperature=args.temperature, rng=args.seed
        )[0][0],
        f"beam search, width {args.beam_width}": decoding.beam_search(
            step_fn, h, last, args.length, beam_width=args.beam_width
        )[0][0],
    }
    for name, ids in samples.items():
        print(f"\n---- {name} ----\n{args.prompt}{text_of(ids)}")
    print()
    elapsed = time.perf_counter() - start  # the PyTorch twin's work; it draws no plot
    loss_plot(
        window_losses,
        history,
        len(window_losses) // max(len(history["loss"]), 1),
        out / "charlm_loss.png",
    )
    model.save(out / "charlm.npz")
    print(f"model saved to {out / 'charlm.npz'}")
    print(
        f"validation perplexity {val_ppl:.3f} after {len(history['loss'])} epochs "
        f"(training {train_time:.1f} s)"
    )
    result = f"val_perplexity={val_ppl:.4f}"
    if args.quantize:
        # the validation loss as fit_stream measured it: the same windows, state carried
        q_loss = training.evaluate_stream(
            _cli.quantized(model, args.quantize),
            val_ids,
            loss=losses.cross_entropy,
            batch_size=args.batch_size // size,
            bptt=args.bptt,
        )
        print(f"quantized ({args.quantize}) validation perplexity {math.exp(q_loss):.3f}")
        result += f" quantized_val_perplexity={math.exp(q_loss):.4f}"
    ranks = f" ranks={size}" if args.distributed else ""
    print(f"RESULT {result} time_s={elapsed:.1f}{ranks}")


if __name__ == "__main__":
    main()
