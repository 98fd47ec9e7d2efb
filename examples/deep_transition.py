"""Deep transitions in time: a plain Elman RNN, a deep-transition RNN and a deep-transition RNN with skip connections, as character language models of about the same parameter count, and how far their gradients reach back.

    python examples/deep_transition.py [--data ROOT] [--out DIR] [--epochs 2] [--hidden 256]
                                       [--transition-layers 2]

The lecture notes (slide 50, after Pascanu et al., "How to Construct Deep Recurrent Neural
Networks", ICLR 2014) make the step from h_{t-1} to h_t itself deep: an MLP of k nonlinear layers
inside the transition (``rnnfast.DeepTransitionRNN(..., transition_layers=k)``), so that each
step can compute more abstract temporal features, at the price of a longer path for the gradient:
k nonlinear layers per step instead of one. Three models read the tinyshakespeare text
(``rnnfast.datasets.load("tinyshakespeare", ROOT)``; ``--chars`` keeps only its beginning), each
Embedding(vocab, 32) -> recurrent layer(s) -> Linear(., vocab) trained by truncated BPTT as
examples/charlm.py (``training.fit_stream``, Adam, gradient clipping):

- plain: ``rnnfast.RNN(32, --hidden)``;
- deep: ``DeepTransitionRNN(32, H, transition_layers=k)``;
- deep + skips: ``DeepTransitionRNN(32, H, num_layers=2, transition_layers=k, input_to_all=True,
  all_to_output=True)`` (the input feeds both layers, both layers feed the output);

H chosen for each deep model so that its parameter count is the closest to the plain model's.
The table gives each one's validation perplexity (the last 10% of the text) and seconds per epoch.

The gradient flow (``rnnfast.diagnostics.gradient_norms``, on each trained recurrent layer over
``--bptt`` validation characters, the loss on the last step's output alone) shows the longer
per-step path: ||dL/dh_t|| relative to the last step, n = T - 1 - t steps back, and its geometric
mean decay per step. The skip model is measured on its first layer alone (the diagnostics follow
stacks whose layers read only the one below; each of its layers is a deep transition of its own).

Writes ``deep_transition.png`` (the gradient curves, with matplotlib) into ``--out`` and ends with
``RESULT ppl_plain=... ppl_deep=... ppl_deep_skip=... grad_plain=... grad_deep=...
grad_deep_skip=... time_s=...``, grad = ||dL/dh_{T-1-n}|| / ||dL/dh_{T-1}|| at n = ``--lag``.
"""

from __future__ import annotations

import math
import time

import _cli  # the examples' shared command line, beside this file
import numpy as np
from _tasks import encode_text  # the task's data, as examples/charlm.py reads it

import rnnfast
from rnnfast import diagnostics, losses, optim, training

EMBED = 32
LAGS = (1, 2, 5, 10, 20, 50)


def build(kind, vocab, hidden, k, seed):
    """Embedding -> the recurrent layer(s) of ``kind`` -> Linear, batch-first and stateful (the
    state carried between windows, as fit_stream wants)."""
    options = dict(batch_first=True, return_sequences=True, stateful=True, seed=seed + 1)
    if kind == "plain":
        rnn, width = rnnfast.RNN(EMBED, hidden, **options), hidden
    elif kind == "deep":
        rnn = rnnfast.DeepTransitionRNN(EMBED, hidden, transition_layers=k, **options)
        width = hidden
    else:
        rnn = rnnfast.DeepTransitionRNN(
            EMBED, hidden, num_layers=2, transition_layers=k, input_to_all=True,
            all_to_output=True, **options,
        )  # fmt: skip
        width = 2 * hidden
    return rnnfast.Sequential(
        [
            rnnfast.Embedding(vocab, EMBED, seed=seed),
            rnn,
            rnnfast.Linear(width, vocab, seed=seed + 2),
        ]
    )


def matched_hidden(kind, vocab, k, target, seed, most):
    """The hidden size in [1, most] whose model has the parameter count closest to ``target``
    (the count grows with H: a bisection)."""
    lo, hi = 1, most
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if build(kind, vocab, mid, k, seed).num_parameters() < target:
            lo = mid
        else:
            hi = mid
    counts = {h: build(kind, vocab, h, k, seed).num_parameters() for h in (lo, hi)}
    return min(counts, key=lambda h: abs(counts[h] - target))


def train(model, train_ids, val_ids, args):
    """fit_stream as examples/charlm.py runs it: (validation perplexity, seconds per epoch)."""
    clock = _cli.EpochClock()
    history = training.fit_stream(
        model,
        train_ids,
        loss=losses.cross_entropy,
        optimizer=optim.Adam(model, lr=args.lr),
        batch_size=args.batch_size,
        bptt=args.bptt,
        epochs=args.epochs,
        clip_norm=args.clip,
        validation_tokens=val_ids,
        callbacks=[clock],
    )
    return math.exp(history["val_loss"][-1]), clock.seconds


def first_layer(rnn):
    """Layer 0 of a stacked DeepTransitionRNN as a one-layer layer with its parameters (what
    the diagnostics can follow: no dense skips)."""
    alone = rnnfast.DeepTransitionRNN(
        rnn.input_size, rnn.hidden_size, transition_layers=rnn.transition_layers,
        batch_first=rnn.batch_first, dtype=rnn.dtype,
    )  # fmt: skip
    alone.load_state_dict({n: p for n, p in rnn.state_dict().items() if n.endswith("_l0")})
    return alone.eval()


def gradient_flow(rnn, x, rng):
    """||dL/dh_t|| / ||dL/dh_{T-1}|| over t (T,) for a loss on the last step's output, a random
    unit direction per sequence (examples/gradient_flow.py's measure)."""
    batch, steps, hidden = x.shape[0], x.shape[1], rnn.hidden_size
    d = np.zeros((batch, steps, hidden), dtype=rnn.dtype)
    last = rng.standard_normal((batch, hidden))
    d[:, -1] = last / np.linalg.norm(last, axis=1, keepdims=True)
    g = diagnostics.gradient_norms(rnn, x, d)
    return g / g[-1]


def plot(curves, path):
    plt = _cli.pyplot("plot")
    if plt is None:
        return
    fig, ax = plt.subplots(figsize=(8, 5))
    for label, rel in curves.items():
        ax.semilogy(np.arange(len(rel)), rel[::-1], label=label, lw=1.8)
    ax.set_xlabel("steps back from the loss (n = T - 1 - t)")
    ax.set_ylabel("||dL/dh_t|| / ||dL/dh_{T-1}||")
    ax.set_title("Gradient flow through time: one vs k nonlinear layers per step")
    ax.legend()
    _cli.save_figure(fig, path)


def main(argv=None):
    parser = _cli.parser(__doc__)
    _cli.add_data(parser, "tinyshakespeare")
    _cli.add_out(parser)
    parser.add_argument("--epochs", type=int, default=2, help="passes over the training text")
    parser.add_argument(
        "--hidden",
        type=int,
        default=256,
        help="hidden units of the plain RNN; the deep models' are sized to its parameter count",
    )
    parser.add_argument(
        "--transition-layers",
        type=int,
        default=2,
        help="k, the nonlinear layers inside each step of the deep models (1 is the plain RNN)",
    )
    parser.add_argument(
        "--chars", type=int, default=0, help="use only the text's first CHARS characters (0: all)"
    )
    parser.add_argument(
        "--batch-size", type=int, default=32, help="parallel streams the training text is cut into"
    )
    parser.add_argument(
        "--bptt",
        type=int,
        default=100,
        help="characters per window (the gradient stops at each window's start); also the "
        "length of the gradient-flow sequences",
    )
    parser.add_argument("--lr", type=float, default=3e-3, help="Adam's learning rate")
    parser.add_argument("--clip", type=float, default=5.0, help="gradient norm clipped to this")
    parser.add_argument("--lag", type=int, default=10, help="steps back of the RESULT's grad_*")
    parser.add_argument("--seed", type=int, default=0, help="seed of the weights")
    parser.add_argument(
        "--threads",
        type=int,
        default=0,
        help="rnnfast threads (0: the library's default, the cores available)",
    )
    args = parser.parse_args(argv)
    for name in ("epochs", "hidden", "transition_layers", "batch_size", "bptt"):
        if getattr(args, name) < 1:
            _cli.fail(parser, f"--{name.replace('_', '-')} {getattr(args, name)}: expected >= 1")
    if not 0 <= args.lag < args.bptt:
        _cli.fail(parser, f"--lag {args.lag}: expected 0 <= lag < --bptt ({args.bptt})")
    out = _cli.out_dir(parser, args.out)
    if args.threads:
        rnnfast.set_num_threads(args.threads)

    start = time.perf_counter()
    text = _cli.load(parser, "tinyshakespeare", args.data)
    if args.chars:
        text = text[: args.chars]
    train_ids, val_ids, alphabet = encode_text(text)
    vocab, k = len(alphabet), args.transition_layers
    print(
        f"{len(train_ids):,} training and {len(val_ids):,} validation characters, "
        f"vocabulary {vocab}"
    )
    target = build("plain", vocab, args.hidden, k, args.seed).num_parameters()
    specs = {
        "plain": ("plain RNN", args.hidden, 1, 1),
        "deep": (
            f"deep transition, k={k}",
            matched_hidden("deep", vocab, k, target, args.seed, args.hidden),
            1,
            k,
        ),
        "deep_skip": (
            f"deep transition + skips, k={k}",
            matched_hidden("skip", vocab, k, target, args.seed, args.hidden),
            2,
            k,
        ),
    }
    rows, models = [], {}
    for key, (label, hidden, layers, kk) in specs.items():
        kind = {"plain": "plain", "deep": "deep", "deep_skip": "skip"}[key]
        model = build(kind, vocab, hidden, k, args.seed)
        ppl, seconds = train(model, train_ids, val_ids, args)
        models[key] = model.eval()
        rows.append((label, hidden, layers, kk, model.num_parameters(), ppl, np.median(seconds)))
        print(f"{label}: validation perplexity {ppl:.3f}, seconds per epoch "
              f"{' '.join(f'{s:.1f}' for s in seconds)}")  # fmt: skip

    print()
    header = ("model", "H", "layers", "k", "params", "val ppl", "s/epoch")
    print(f"{header[0]:32s} {header[1]:>5s} {header[2]:>6s} {header[3]:>3s} {header[4]:>9s} "
          f"{header[5]:>8s} {header[6]:>8s}")  # fmt: skip
    for label, hidden, layers, kk, params, ppl, sec in rows:
        print(f"{label:32s} {hidden:5d} {layers:6d} {kk:3d} {params:9,d} {ppl:8.3f} {sec:8.2f}")

    # gradient flow over validation windows, each trained recurrent layer from a zero state
    rng = np.random.default_rng(args.seed)
    steps = min(args.bptt, len(val_ids))
    count = max(1, min(8, len(val_ids) // steps))
    ids = val_ids[: count * steps].reshape(count, steps)
    curves = {}
    for (key, model), row in zip(models.items(), rows):
        embedding, rnn, _ = model.layers
        layer = first_layer(rnn) if key == "deep_skip" else rnn
        curves[row[0] + (" (layer 0)" if key == "deep_skip" else "")] = gradient_flow(
            layer, embedding(ids), rng
        )
    lags = [n for n in LAGS if n < steps]
    print(
        f"\ngradient flow: ||dL/dh_t|| / ||dL/dh_T-1|| n steps back (T = {steps}, {count} "
        "validation sequences), and its mean decay per step"
    )
    print(f"{'model':44s} " + " ".join(f"{'n=' + str(n):>9s}" for n in lags) + f" {'per step':>9s}")
    for label, rel in curves.items():
        back = rel[::-1]
        n_last = lags[-1] if lags else 0
        per_step = back[n_last] ** (1.0 / n_last) if n_last else 1.0
        print(f"{label:44s} " + " ".join(f"{back[n]:9.2e}" for n in lags) + f" {per_step:9.3f}")
    print(
        f"(each step back crosses 1 nonlinear layer in the plain RNN, {k} in the deep transitions)"
    )
    elapsed = time.perf_counter() - start
    plot(curves, out / "deep_transition.png")
    grads = [rel[::-1][args.lag] for rel in curves.values()] if args.lag < steps else [1.0] * 3
    ppls = [row[5] for row in rows]
    print(
        f"RESULT ppl_plain={ppls[0]:.4f} ppl_deep={ppls[1]:.4f} ppl_deep_skip={ppls[2]:.4f} "
        f"grad_plain={grads[0]:.3e} grad_deep={grads[1]:.3e} grad_deep_skip={grads[2]:.3e} "
        f"time_s={elapsed:.1f}"
    )


if __name__ == "__main__":
    main()
