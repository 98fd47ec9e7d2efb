"""Gradient flow through time: W_hh scaled to spectral radius 0.9, 1.0 and 1.1 makes the gradient vanish, persist and explode over 100 steps; leaky units and dilations lengthen its reach.

    python examples/gradient_flow.py [--out DIR] [--steps 100] [--hidden 64] [--alphas 0.5 0.25]
                                     [--dilations 2 4]

The lecture notes' claim (slides 51-53): dh_T/dh_t is a product of T - t factors
W_hh^T diag(act'(.)), so in the linear regime (act' ~ 1) its norm goes like rho^(T - t), rho the
spectral radius of W_hh. Each model here is an rnnfast.RNN whose W_hh is rho Q (Q a random
orthogonal matrix, so every singular value is rho; ``--matrix gaussian`` scales a Gaussian matrix
to radius rho instead), fed small random inputs (``--input-scale``; raise it to see tanh's
saturation shorten the reach). A loss on the last step's output alone gives, through one
backward (``rnnfast.diagnostics.gradient_norms``), ||dL/dh_t|| at every step t; the table and the
plot show it relative to the last step, k = T - 1 - t steps back. Leaky units
(h_t = (1 - alpha) h_{t-1} + alpha tanh(...), ``--alphas``) at the smallest radius move the
Jacobian's eigenvalues towards 1 and carry the gradient further. Dilated units (h_t reads
h_{t-d}, ``--dilations``, the notes' temporal skip connections) at the smallest radius pass it d
steps back per factor of W_hh, to the steps of the loss's own chain only (k a multiple of d; the
other chains get none). "reach" is the largest k whose relative norm (on the loss's chain) is
still at least ``--threshold``. ``||dh_T/dh_0||`` (the spectral norm of the
Jacobian, ``diagnostics.jacobian_norms``) is printed beside it.

Writes ``gradient_flow.png`` (with matplotlib) and ``gradient_flow.csv`` into ``--out`` and ends
with ``RESULT ratio_rho<r>=... (one per radius) reach_alpha<a>=... (plain and leaky)
reach_dilation<d>=... time_s=...``, ratio = ||dL/dh_0|| / ||dL/dh_{T-1}||.
"""

from __future__ import annotations

import time

import _cli  # the examples' shared command line, beside this file
import numpy as np

import rnnfast
from rnnfast import diagnostics


def recurrent_matrix(rng, hidden, radius, kind):
    """rho Q (Q orthogonal) or a Gaussian matrix scaled to spectral radius rho."""
    if kind == "orthogonal":
        q, r = np.linalg.qr(rng.standard_normal((hidden, hidden)))
        return radius * q * np.sign(np.diag(r))
    w = rng.standard_normal((hidden, hidden)) / np.sqrt(hidden)
    return diagnostics.scale_to_spectral_radius(w, radius)


def build(hidden, radius, alpha, w_base, seed, nonlinearity, dilation=1):
    rnn = rnnfast.RNN(
        hidden,
        hidden,
        nonlinearity=nonlinearity,
        bias=False,
        dtype=np.float64,
        seed=seed,
        alpha=alpha,
        dilation=dilation,
    )
    w = diagnostics.scale_to_spectral_radius(w_base, radius)
    rnn.load_state_dict({"weight_ih_l0": np.eye(hidden), "weight_hh_l0": w})
    return rnn


def flow(rnn, x, rng):
    """||dL/dh_t|| / ||dL/dh_{T-1}|| over t for a loss on the last output (a random unit
    direction per sequence), and ||dh_T/dh_0||."""
    _, batch, hidden = x.shape
    d = np.zeros_like(x)
    last = rng.standard_normal((batch, hidden))
    d[-1] = last / np.linalg.norm(last, axis=1, keepdims=True)
    g = diagnostics.gradient_norms(rnn, x, d)
    return g / g[-1], diagnostics.jacobian_norms(rnn, x)[-1]


def reach(relative, threshold, every=1):
    """The most steps back whose relative gradient norm is still >= threshold, looking at
    every ``every``-th step back (a dilated layer's gradient reaches only its own chain)."""
    back = relative[::-1][::every]  # k = 0, every, 2 every, ...
    below = np.nonzero(back < threshold)[0]
    return every * int(len(back) - 1 if below.size == 0 else below[0] - 1)


def plot(curves, path, steps, threshold):
    """One curve per model; a dilated model's at the steps of the loss's chain (every d-th)."""
    plt = _cli.pyplot("plot")
    if plt is None:
        return
    fig, ax = plt.subplots(figsize=(8, 5))
    k = np.arange(steps)
    for label, (rel, every) in curves.items():
        ax.semilogy(
            k[::every],
            rel[::-1][::every],
            label=label,
            lw=1.8,
            ls=":" if every > 1 else "--" if "alpha=1" not in label else "-",
        )
    ax.axhline(threshold, color="grey", lw=0.8, ls=":")
    ax.set_xlabel("steps back from the loss (k = T - 1 - t)")
    ax.set_ylabel("||dL/dh_t|| / ||dL/dh_{T-1}||")
    ax.set_title("Gradient flow through time: spectral radius of W_hh, leaky units, dilations")
    ax.legend()
    _cli.save_figure(fig, path)


# The options that list models, one model per value: (name, value type, default, help, what a
# value must satisfy, how the error message names that).
MODEL_LISTS = [
    (
        "radii",
        float,
        [0.9, 1.0, 1.1],
        "spectral radii of W_hh, one plain model each",
        lambda r: r > 0,
        "positive radii",
    ),
    (
        "alphas",
        float,
        [0.5, 0.25],
        "leak rates of the leaky models (at the smallest radius)",
        lambda a: 0 < a <= 1,
        "leak rates in (0, 1]",
    ),
    (
        "dilations",
        int,
        [2, 4],
        "dilations of the dilated models (plain units, at the smallest radius)",
        lambda d: d >= 1,
        "positive integers",
    ),
]


def main(argv=None):
    parser = _cli.parser(__doc__)
    _cli.add_out(parser)
    parser.add_argument("--steps", type=int, default=100, help="sequence length T")
    parser.add_argument("--hidden", type=int, default=64, help="hidden units H")
    parser.add_argument("--batch", type=int, default=8, help="sequences averaged over")
    for name, kind, default, text, _, _ in MODEL_LISTS:
        parser.add_argument(f"--{name}", type=kind, nargs="+", default=default, help=text)
    parser.add_argument(
        "--matrix",
        choices=["orthogonal", "gaussian"],
        default="orthogonal",
        help="W_hh = rho Q with Q orthogonal, or a Gaussian matrix scaled to radius rho",
    )
    parser.add_argument(
        "--input-scale",
        type=float,
        default=1e-6,
        help="standard deviation of the random inputs (small: linear regime)",
    )
    parser.add_argument(
        "--nonlinearity", choices=["tanh", "relu"], default="tanh", help="the units' activation"
    )
    parser.add_argument(
        "--threshold",
        type=float,
        default=1e-2,
        help="relative gradient norm that counts as still reaching",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the matrices and inputs")
    args = parser.parse_args(argv)
    for name in ("steps", "hidden", "batch"):
        if getattr(args, name) < 1:
            _cli.fail(parser, f"--{name}: expected a positive integer, got {getattr(args, name)}")
    for name, _, _, _, valid, expected in MODEL_LISTS:
        if not all(map(valid, getattr(args, name))):
            _cli.fail(parser, f"--{name}: expected {expected}, got {getattr(args, name)}")
    out = _cli.out_dir(parser, args.out)

    start = time.perf_counter()
    rng = np.random.default_rng(args.seed)
    w_base = recurrent_matrix(rng, args.hidden, 1.0, args.matrix)
    x = rng.standard_normal((args.steps, args.batch, args.hidden)) * args.input_scale
    smallest = min(args.radii)
    configs = [(rho, 1.0, 1) for rho in args.radii]
    configs += [(smallest, a, 1) for a in args.alphas if a != 1.0]
    configs += [(smallest, 1.0, d) for d in args.dilations if d > 1]
    curves, rows, result = {}, [], []
    # multiples of 4 (and 2): the dilated models' gradients reach only their own chain
    marks = [k for k in (1, 4, 8, 24, 48, 96, args.steps - 1) if k < args.steps]
    marks = sorted(set(marks))
    for rho, alpha, d in configs:
        rnn = build(args.hidden, rho, alpha, w_base, args.seed, args.nonlinearity, d)
        radius = diagnostics.for_layer(rnn)["weight_hh_l0"][0]
        rel, jac = flow(rnn, x, np.random.default_rng(args.seed + 1))
        label = f"rho={rho:g}, " + (f"d={d}" if d > 1 else f"alpha={alpha:g}")
        curves[label] = (rel, d)
        far = reach(rel, args.threshold, d)
        rows.append((label, radius, [rel[-1 - k] for k in marks], far, jac))
        if alpha == 1.0 and d == 1:
            result.append(f"ratio_rho{rho:g}={rel[0]:.3g}")
    for (rho, alpha, d), row in zip(configs, rows):
        if rho == smallest and d == 1:
            result.append(f"reach_alpha{alpha:g}={row[3]}")
        elif d > 1:
            result.append(f"reach_dilation{d}={row[3]}")

    print(
        f"||dL/dh_t|| relative to the last step, k steps back (T = {args.steps}, "
        f"H = {args.hidden}, {args.matrix} W_hh, inputs x {args.input_scale:g}, "
        f"{args.nonlinearity}); ISA {rnnfast._core.active_isa()}"
    )
    head = f"{'model':<22}{'radius':>8}" + "".join(f"{'k=' + str(k):>11}" for k in marks)
    head += f"{'reach':>8}{'||dh_T/dh_0||':>15}"
    print(head)
    print("-" * len(head))
    for label, radius, vals, r, jac in rows:
        print(
            f"{label:<22}{radius:>8.3f}"
            + "".join(f"{v:>11.3g}" for v in vals)
            + f"{r:>8d}{jac:>15.3g}"
        )

    csv = out / "gradient_flow.csv"
    with open(csv, "w", encoding="utf-8") as f:
        f.write("k," + ",".join(f'"{label}"' for label in curves) + "\n")
        f.writelines(
            f"{k}," + ",".join(f"{rel[-1 - k]:.6g}" for rel, _ in curves.values()) + "\n"
            for k in range(args.steps)
        )
    print(f"curves written to {csv}")
    elapsed = time.perf_counter() - start
    plot(curves, out / "gradient_flow.png", args.steps, args.threshold)
    print("RESULT " + " ".join(result) + f" time_s={elapsed:.1f}")


if __name__ == "__main__":
    main()
