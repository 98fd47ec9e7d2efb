"""Long memory: the copy-memory task over delays T for a plain RNN, a leaky RNN, a dilated stack, a JordanRNN, a GRU and an LSTM of about the same parameter count.

    python examples/long_memory.py [--out DIR] [--lengths 50,100,200,500,1000] [--epochs 8]

The task (the lecture notes' classic long-memory test): each sequence shows S (``--symbols``)
random symbols out of K (``--classes``), then T blank steps, then a recall marker; from the
marker on, S steps must output the S symbols in order. Inputs are one-hot over K + 2 (the
symbols, blank, marker). The loss (softmax cross-entropy) and the accuracy count only the S
recalled symbols, so chance is 1/K. Each epoch trains on ``--train-size`` fresh sequences (the
task's usual endless data, so no model can memorise a training set); every model sees the same
sequences at a given T, and is tested on the same ``--test-size`` held-out ones.

The models, each followed by a Dense layer to the K classes at every step, except JordanRNN,
whose outputs are the logits themselves:

- ``plain``: ``rnnfast.RNN(K + 2, H)``, H = ``--hidden``;
- ``leaky``: the same with leaky units, ``alpha=--alpha`` (h_t = (1 - alpha) h_{t-1} + alpha
  tanh(...));
- ``dilated``: ``rnnfast.RNN(K + 2, h, num_layers=n, dilation=[1, 2, 4, ...])``
  (``--dilations``; layer l reads h_{t-d_l}), so a symbol reaches the recall in about
  n + T / d_max steps instead of T;
- ``jordan``: ``rnnfast.JordanRNN(K + 2, h, K)``, the output-to-hidden recurrence, trained
  free-running with exact BPTT through its fed-back outputs (``feedback="output"``). Teacher
  forcing would feed it the targets of the step before, which carry nothing about the symbols
  (the blank steps have none), so it would be at chance by construction; free-running, its K
  outputs at the unscored steps may carry memory: its best chance;
- ``gru``, ``lstm``: ``rnnfast.GRU(K + 2, h)`` and ``rnnfast.LSTM(K + 2, h)``, the gated cells
  the notes name as the remedy for vanishing gradients (with ``--init orthogonal`` each gate's
  block of W_hh starts orthogonal; the LSTM's forget-gate bias at 1, ``unit_forget_bias``).

The widths h are chosen so that each model's parameter count is the closest to the plain
model's. Every Elman layer's W_hh starts as a random orthogonal matrix (spectral radius 1,
``--init orthogonal``; ``--init uniform`` keeps rnnfast's U(-1/sqrt(H), 1/sqrt(H)), radius about
0.58, with which the dilated stack learns several times more slowly, solving neither T = 100 nor
T = 1000 in the default epochs, and the plain RNN stays at chance from T = 100 on). Adam, gradient
clipping (``--clip-norm``), fixed seeds; training stops early once the accuracy on a validation
set reaches ``--stop-at``. A model "solves" T when its test accuracy is at least ``--solved``;
it is "at chance" (no better than guessing) when its accuracy is below 1/K + 3 standard
deviations of a guesser's over the test set's recalled symbols (below 1/K counts too: a model
whose near-uniform outputs tip the wrong way knows no more than a guesser).

Prints one line per run and the table of test accuracy by model and T (``~`` at chance,
``*`` solved), writes ``long_memory.csv`` and, with matplotlib, ``long_memory.png`` (accuracy
against T, one line per model) into ``--out``, and ends with
``RESULT solved_<model>=... (the largest T solved, 0 for none) target=met|not_met target_T=...
time_s=...``: the target is met when the dilated stack solves a T at which the plain RNN is at
chance (target_T, the largest such T, else 0).
"""

from __future__ import annotations

import os

# JordanRNN's free-running loop multiplies small matrices with NumPy at every step, where a
# multi-threaded BLAS only adds overhead (several times slower on a busy machine).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import time

import _cli  # the examples' shared command line, beside this file
import numpy as np

import rnnfast
from rnnfast import losses, optim, training

MODELS = ("plain", "leaky", "dilated", "jordan", "gru", "lstm")


def int_list(text):
    """'50,100,200' -> [50, 100, 200] (for argparse)."""
    return [int(v) for v in text.replace(" ", "").split(",") if v]


def name_list(text):
    return [v for v in text.replace(" ", "").split(",") if v]


def copy_memory(n, delay, symbols, classes, rng):
    """(x (n, L, K + 2) one-hot, y (n, L) with -1 where nothing is scored, the symbols (n, S)),
    L = 2 S + delay: S symbols, ``delay`` blanks, the marker and S - 1 blanks; the last S steps
    recall the symbols."""
    steps = 2 * symbols + delay
    sym = rng.integers(0, classes, (n, symbols))
    ids = np.full((n, steps), classes)  # blank
    ids[:, :symbols] = sym
    ids[:, symbols + delay] = classes + 1  # the recall marker
    x = np.eye(classes + 2, dtype=np.float32)[ids]
    y = np.full((n, steps), -1, dtype=np.int64)
    y[:, -symbols:] = sym
    return x, y, sym


def recall_loss(out, y, mask=None):
    """Cross-entropy over the recalled symbols only (y = -1 elsewhere)."""
    return losses.cross_entropy(out, y, ignore_index=-1, mask=mask)


def orthogonal(rng, n):
    q, r = np.linalg.qr(rng.standard_normal((n, n)))
    return q * np.sign(np.diag(r))


def build(kind, hidden, args, seed):
    """One model of the comparison, with ``hidden`` units per layer."""
    d_in, k = args.classes + 2, args.classes
    if kind == "jordan":
        return rnnfast.JordanRNN(d_in, hidden, k, batch_first=True, seed=seed, feedback="output")
    if kind in ("gru", "lstm"):
        options = {"unit_forget_bias": True} if kind == "lstm" else {}
        rnn = getattr(rnnfast, kind.upper())(
            d_in, hidden, batch_first=True, return_sequences=True, seed=seed, **options
        )
    else:
        options = {"plain": {}, "leaky": {"alpha": args.alpha}}.get(kind)
        if options is None:  # dilated
            options = {"num_layers": len(args.dilations), "dilation": list(args.dilations)}
        rnn = rnnfast.RNN(
            d_in, hidden, batch_first=True, return_sequences=True, seed=seed, **options
        )
    if args.init == "orthogonal":
        rng = np.random.default_rng([seed, 1])
        state = rnn.state_dict()
        for name, w in state.items():
            if name.startswith("weight_hh"):  # each gate's (H, H) block
                blocks = [orthogonal(rng, w.shape[1]) for _ in range(w.shape[0] // w.shape[1])]
                state[name] = np.concatenate(blocks).astype(w.dtype)
        rnn.load_state_dict(state)
    return rnnfast.Sequential([rnn, rnnfast.Dense(hidden, k, seed=seed + 1)])


def count(model):
    return sum(p.size for p in model.parameters())


def matched_hidden(kind, target, args):
    """The width whose parameter count is the closest to ``target`` (the counts grow with it)."""
    best, best_gap, hidden = 1, None, 1
    while True:
        gap = count(build(kind, hidden, args, 0)) - target
        if best_gap is None or abs(gap) < abs(best_gap):
            best, best_gap = hidden, gap
        if gap >= 0:
            return best
        hidden += 1


def accuracy(model, x, sym):
    out = training.predict(model, x, batch_size=256)
    return float(np.mean(out[:, -sym.shape[1] :].argmax(axis=-1) == sym))


def run(kind, hidden, delay, args):
    """Train one model at one delay; (test accuracy, epochs run, seconds)."""
    start = time.perf_counter()
    model = build(kind, hidden, args, args.seed)
    opt = optim.Adam(model, lr=args.lr)
    val_x, _, val_sym = copy_memory(
        args.val_size,
        delay,
        args.symbols,
        args.classes,
        np.random.default_rng([args.seed, delay, 1]),
    )
    epochs = 0
    for epoch in range(args.epochs):
        rng = np.random.default_rng([args.seed, delay, 0, epoch])
        x, y, _ = copy_memory(args.train_size, delay, args.symbols, args.classes, rng)
        training.fit(
            model,
            x,
            y,
            loss=recall_loss,
            optimizer=opt,
            epochs=1,
            batch_size=args.batch_size,
            clip_norm=args.clip_norm,
            seed=args.seed + epoch,
            verbose=False,
        )
        epochs += 1
        del x, y
        if accuracy(model, val_x, val_sym) >= args.stop_at:
            break
    test_x, _, test_sym = copy_memory(
        args.test_size,
        delay,
        args.symbols,
        args.classes,
        np.random.default_rng([args.seed, delay, 2]),
    )
    return accuracy(model, test_x, test_sym), epochs, time.perf_counter() - start


def plot(results, lengths, models, chance, solved, path):
    plt = _cli.pyplot("plot")
    if plt is None:
        return
    fig, ax = plt.subplots(figsize=(8, 5))
    for kind in models:
        ax.plot(lengths, [results[kind, t][0] for t in lengths], marker="o", lw=1.8, label=kind)
    ax.axhline(chance, color="grey", lw=0.8, ls="--", label=f"chance (1/{round(1 / chance)})")
    ax.axhline(solved, color="grey", lw=0.8, ls=":", label=f"solved ({solved:g})")
    ax.set_xscale("log")
    ax.set_xticks(lengths, [str(t) for t in lengths])
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("delay T (blank steps between the symbols and their recall)")
    ax.set_ylabel("test accuracy on the recalled symbols")
    ax.set_title("Copy memory: recurrent cells of the same size")
    ax.legend()
    _cli.save_figure(fig, path)


def main(argv=None):
    parser = _cli.parser(__doc__)
    _cli.add_out(parser)
    parser.add_argument(
        "--lengths",
        type=int_list,
        default="50,100,200,500,1000",
        metavar="T,T,...",
        help="delays T (blank steps between the symbols and the recall marker), comma-separated",
    )
    parser.add_argument(
        "--models",
        type=name_list,
        default=",".join(MODELS),
        metavar="NAME,...",
        help=f"models to compare, comma-separated, out of {','.join(MODELS)}",
    )
    parser.add_argument("--symbols", type=int, default=5, help="symbols to remember, S")
    parser.add_argument("--classes", type=int, default=8, help="symbol alphabet K (chance 1/K)")
    parser.add_argument(
        "--hidden", type=int, default=48, help="hidden units H of the plain and leaky RNNs"
    )
    parser.add_argument("--alpha", type=float, default=0.1, help="leak rate of the leaky RNN")
    parser.add_argument(
        "--dilations",
        type=int_list,
        default="1,2,4,8,16,32,64,128",
        metavar="D,D,...",
        help="dilation of each layer of the dilated stack, comma-separated",
    )
    parser.add_argument(
        "--init",
        choices=["orthogonal", "uniform"],
        default="orthogonal",
        help="W_hh's start: a random orthogonal matrix, or rnnfast's uniform default",
    )
    parser.add_argument("--epochs", type=int, default=8, help="most epochs per model and T")
    parser.add_argument(
        "--train-size", type=int, default=2048, help="fresh training sequences per epoch"
    )
    parser.add_argument("--val-size", type=int, default=256, help="sequences for early stopping")
    parser.add_argument("--test-size", type=int, default=512, help="held-out test sequences")
    parser.add_argument("--batch-size", type=int, default=64, help="sequences per batch")
    parser.add_argument("--lr", type=float, default=3e-3, help="Adam's learning rate")
    parser.add_argument("--clip-norm", type=float, default=1.0, help="global gradient-norm clip")
    parser.add_argument(
        "--stop-at",
        type=float,
        default=0.99,
        help="stop training a model once its validation accuracy reaches this",
    )
    parser.add_argument(
        "--solved", type=float, default=0.9, help="test accuracy that counts as solving a T"
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="threads of rnnfast's kernels (by default rnnfast's: the cores OpenMP sees)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the data and the weights")
    args = parser.parse_args(argv)
    for name in ("symbols", "epochs", "train_size", "val_size", "test_size", "batch_size"):
        if getattr(args, name) < 1:
            flag = "--" + name.replace("_", "-")
            _cli.fail(parser, f"{flag}: expected a positive integer, got {getattr(args, name)}")
    if args.classes < 2:
        _cli.fail(parser, f"--classes: expected at least 2, got {args.classes}")
    if args.hidden < 1:
        _cli.fail(parser, f"--hidden: expected a positive integer, got {args.hidden}")
    if not args.lengths or min(args.lengths) < 1:
        _cli.fail(parser, f"--lengths: expected positive delays, got {args.lengths}")
    if not args.dilations or min(args.dilations) < 1:
        _cli.fail(parser, f"--dilations: expected positive dilations, got {args.dilations}")
    unknown = [m for m in args.models if m not in MODELS]
    if unknown or not args.models:
        _cli.fail(parser, f"--models: expected names out of {','.join(MODELS)}, got {unknown}")
    if not 0 < args.alpha <= 1:
        _cli.fail(parser, f"--alpha: expected a leak rate in (0, 1], got {args.alpha}")
    if args.threads is not None:
        if args.threads < 1:
            _cli.fail(parser, f"--threads: expected a positive integer, got {args.threads}")
        rnnfast.set_num_threads(args.threads)
    out = _cli.out_dir(parser, args.out)
    lengths, models = sorted(set(args.lengths)), list(dict.fromkeys(args.models))

    start = time.perf_counter()
    target = count(build("plain", args.hidden, args, 0))
    hidden = {
        kind: args.hidden if kind in ("plain", "leaky") else matched_hidden(kind, target, args)
        for kind in models
    }
    params = {kind: count(build(kind, hidden[kind], args, 0)) for kind in models}
    chance = 1.0 / args.classes
    predictions = args.test_size * args.symbols
    at_chance = chance + 3 * np.sqrt(chance * (1 - chance) / predictions)
    print(
        f"copy memory: {args.symbols} symbols out of {args.classes} (chance {chance:.3f}), "
        f"delays {lengths}; up to {args.epochs} epochs of {args.train_size} fresh sequences; "
        f"ISA {rnnfast._core.active_isa()}, {rnnfast.get_num_threads()} thread(s)"
    )
    for kind in models:
        extra = {"leaky": f", alpha={args.alpha:g}", "dilated": f", dilations {args.dilations}"}
        print(f"  {kind:<8} h={hidden[kind]:<4} {params[kind]} parameters{extra.get(kind, '')}")
    results = {}
    for delay in lengths:
        for kind in models:
            acc, epochs, seconds = run(kind, hidden[kind], delay, args)
            results[kind, delay] = (acc, epochs, seconds)
            print(
                f"{kind:<8} T={delay:<5} accuracy {acc:.4f} after {epochs} epoch(s), "
                f"{seconds:.1f} s",
                flush=True,
            )

    def mark(acc):
        return "*" if acc >= args.solved else "~" if acc < at_chance else " "

    print(
        f"\ntest accuracy on the recalled symbols ({args.test_size} sequences; * solved: "
        f">= {args.solved:g}, ~ at chance, no better than guessing: < {at_chance:.3f})"
    )
    head = f"{'model':<10}{'params':>8}" + "".join(f"{'T=' + str(t):>10}" for t in lengths)
    head += f"{'time_s':>9}"
    print(head)
    print("-" * len(head))
    for kind in models:
        cells = "".join(f"{results[kind, t][0]:>9.3f}{mark(results[kind, t][0])}" for t in lengths)
        seconds = sum(results[kind, t][2] for t in lengths)
        print(f"{kind:<10}{params[kind]:>8}{cells}{seconds:>9.1f}")

    csv = out / "long_memory.csv"
    with open(csv, "w", encoding="utf-8") as f:
        f.write("model,T,parameters,hidden,test_accuracy,epochs,seconds\n")
        f.writelines(
            f"{kind},{t},{params[kind]},{hidden[kind]},{results[kind, t][0]:.4f},"
            f"{results[kind, t][1]},{results[kind, t][2]:.2f}\n"
            for kind in models
            for t in lengths
        )
    print(f"table written to {csv}")
    elapsed = time.perf_counter() - start
    plot(results, lengths, models, chance, args.solved, out / "long_memory.png")

    solved = {
        kind: max([t for t in lengths if results[kind, t][0] >= args.solved], default=0)
        for kind in models
    }
    summary = [f"solved_{kind}={solved[kind]}" for kind in models]
    if "plain" in models and "dilated" in models:
        hits = [
            t
            for t in lengths
            if results["dilated", t][0] >= args.solved and results["plain", t][0] < at_chance
        ]
        summary.append(f"target={'met' if hits else 'not_met'} target_T={max(hits, default=0)}")
    print("RESULT " + " ".join(summary) + f" time_s={elapsed:.1f}")


if __name__ == "__main__":
    main()
