"""JordanRNN (output-to-hidden recurrence, teacher-forced) against an Elman RNN of the same size:
the lecture notes' trade-off measured. Teacher forcing decouples the time steps, so a JordanRNN
training step is a few GEMMs over all T*B rows; the RNN's BPTT is sequential in T. The RNN's
hidden-to-hidden recurrence is the more powerful one.

    python -m bench.layers.jordan_vs_rnn [--cases T,B,D,H,O;...] [--threads 1,2] [--repeats 9]
                                         [--data ROOT] [--epochs 30] [--out PATH]

1. Training step (forward, MSE loss, backward, Adam step) at T >= 100, B x D -> H -> O, for
   each case and thread count:
   ``JordanRNN(D, H, O, teacher_forced=True)`` on its packed input ``[x, y_prev]`` (built once,
   as the data is) against ``Sequential([RNN(D, H), Dense(H, O)])`` (the same D, H, O: the
   JordanRNN's output layer is that Dense). Medians of alternating repeats, and their ratio
   (target: JordanRNN >= 3x faster). The GEMM flops of a step are shown beside them:
   6 T B H (D + 2 O) for the JordanRNN, 6 T B H (D + H + O) for the RNN and its Dense.
2. Sunspots (the monthly series of examples/sunspots.py, split 80/20 in time, min-max scaled by
   the training part): windows of ``--window`` months, every step predicting the next month
   (targets s[t+1] for inputs s[t]), MSE, Adam, the same H, epochs and batches for both. The
   JordanRNN is trained teacher-forced, fed the true previous month, which for a univariate
   series is its input again: each of its forecasts reads one month, the RNN's the whole window
   before it (the notes' "strictly less powerful"). Time per epoch (medians,
   the two models' epochs alternating) and the test RMSE of the one-month-ahead forecast at the
   last step of each test window, in sunspot units, beside the persistence baseline.

Prints the tables with the ISA and thread count, and writes JSON (default
bench/results/jordan_vs_rnn.json).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import rnnfast
from bench import RESULTS, SHARED_DATA
from bench._common import time_alternating
from bench.layers._jordan_step import step_runners
from examples._tasks import split_scale  # examples/sunspots.py's split and scaling
from rnnfast import JordanRNN, datasets, optim, training

# the step table's repeats: each at least this long, after this long a warm-up per model
MIN_REPEAT_S, WARMUP_S = 0.2, 0.3


# ---- 1. training step ---------------------------------------------------------------------------


def bench_steps(args):
    rows = []
    for threads in args.threads:
        with rnnfast.threads(threads):
            for steps, batch, d, h, o in args.cases:
                fns = step_runners(steps, batch, d, h, o)
                timed = time_alternating(fns, args.repeats, MIN_REPEAT_S, warmup_s=WARMUP_S)
                med = {name: t["median_s"] for name, t in timed.items()}
                n = steps * batch
                rows.append(
                    {
                        "threads": threads,
                        "T": steps,
                        "B": batch,
                        "D": d,
                        "H": h,
                        "O": o,
                        "jordan_ms": med["JordanRNN"] * 1e3,
                        "rnn_ms": med["RNN + Dense"] * 1e3,
                        "speedup": med["RNN + Dense"] / med["JordanRNN"],
                        "jordan_gflop": 6 * n * h * (d + 2 * o) / 1e9,
                        "rnn_gflop": 6 * n * h * (d + h + o) / 1e9,
                    }
                )
                print(_step_line(rows[-1]), flush=True)
    return rows


STEP_HEAD = (
    f"{'thr':>4}{'T':>6}{'B':>5}{'D':>5}{'H':>6}{'O':>5}{'JordanRNN ms':>14}"
    f"{'RNN+Dense ms':>14}{'speedup':>9}{'GFLOP J / R':>14}"
)


def _step_line(r):
    return (
        f"{r['threads']:>4}{r['T']:>6}{r['B']:>5}{r['D']:>5}{r['H']:>6}{r['O']:>5}"
        f"{r['jordan_ms']:>14.2f}{r['rnn_ms']:>14.2f}{r['speedup']:>8.2f}x"
        f"{r['jordan_gflop']:>7.3f} /{r['rnn_gflop']:>6.3f}"
    )


# ---- 2. sunspots ----------------------------------------------------------------------------------


def seq_windows(series, window, first_target, last_target):
    """(x, y, idx): x (M, W, 1) = s[i-W:i], y (M, W, 1) = s[i-W+1:i+1] for the last targets i
    in [first_target, last_target)."""
    idx = np.arange(max(first_target, window), last_target)
    x = np.stack([series[i - window : i] for i in idx])[..., None]
    y = np.stack([series[i - window + 1 : i + 1] for i in idx])[..., None]
    return x.astype(np.float32), y.astype(np.float32), idx


def bench_sunspots(args):
    values = datasets.load("sunspots", args.data).values.astype(np.float64)
    series, split, (lo, hi) = split_scale(values)
    x_tr, y_tr, _ = seq_windows(series, args.window, 0, split)
    x_te, y_te, idx = seq_windows(series, args.window, split, len(series))
    H = args.sun_hidden
    jordan = JordanRNN(1, H, 1, batch_first=True, teacher_forced=True, seed=args.seed)
    # y_{-1} of each window is the month before its first target: its first input
    in_tr = jordan.teacher_forcing_inputs(x_tr, y_tr, y0=x_tr[:, 0])
    in_te = jordan.teacher_forcing_inputs(x_te, y_te, y0=x_te[:, 0])
    rnn = rnnfast.Sequential(
        [
            rnnfast.RNN(1, H, batch_first=True, return_sequences=True, seed=args.seed),
            rnnfast.Dense(H, 1, seed=args.seed + 1),
        ]
    )
    models = {"JordanRNN": (jordan, in_tr, in_te), "RNN + Dense": (rnn, x_tr, x_te)}
    opts = {name: optim.Adam(m, lr=args.lr) for name, (m, _, _) in models.items()}
    times = {name: [] for name in models}
    for epoch in range(args.epochs):
        for name, (model, xin, _) in models.items():  # the epochs alternate
            start = time.perf_counter()
            training.fit(
                model,
                xin,
                y_tr,
                loss="mse",
                optimizer=opts[name],
                epochs=1,
                batch_size=args.batch_size,
                seed=args.seed + epoch,
                verbose=False,
            )
            times[name].append(time.perf_counter() - start)
    truth = values[idx]
    out = {}
    for name, (model, _, xin) in models.items():
        pred = training.predict(model, xin)[:, -1, 0] * (hi - lo) + lo
        out[name] = {
            "epoch_s": statistics.median(times[name]),
            "test_rmse": float(np.sqrt(np.mean((pred - truth) ** 2))),
            "params": sum(p.size for p in model.parameters()),
        }
    persistence = float(np.sqrt(np.mean((values[idx - 1] - truth) ** 2)))
    return {
        "models": out,
        "persistence_rmse": persistence,
        "train_windows": len(x_tr),
        "test_windows": len(x_te),
        "window": args.window,
        "hidden": H,
        "epochs": args.epochs,
    }


# ---- main -----------------------------------------------------------------------------------------


def _ints(text):
    return [int(v) for v in text.split(",") if v]


def _cases(text):
    cases = [tuple(_ints(c)) for c in text.split(";") if c]
    if any(len(c) != 5 or min(c) < 1 for c in cases):
        raise argparse.ArgumentTypeError(f"expected T,B,D,H,O;... of positive ints, got {text!r}")
    return cases


DEFAULT_CASES = (
    "100,32,32,128,32;200,32,32,128,32;100,32,32,256,32;100,32,32,512,32;"
    "200,4,32,256,32;1000,1,32,128,32"
)


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument(
        "--cases",
        type=_cases,
        default=_cases(DEFAULT_CASES),
        help="training-step shapes T,B,D,H,O separated by ';'",
    )
    parser.add_argument("--repeats", type=int, default=9, help="alternating timed repeats")
    parser.add_argument(
        "--data",
        type=Path,
        default=SHARED_DATA if SHARED_DATA.is_dir() else None,
        help="datasets root (ROOT/sunspots/sunspots_monthly.dat)",
    )
    parser.add_argument("--window", type=int, default=24, help="months per sunspots window")
    parser.add_argument("--sun-hidden", type=int, default=64, help="H of the sunspots models")
    parser.add_argument("--epochs", type=int, default=30, help="sunspots epochs")
    parser.add_argument("--batch-size", type=int, default=32, help="sunspots windows per batch")
    parser.add_argument("--lr", type=float, default=2e-3, help="Adam's learning rate (sunspots)")
    parser.add_argument("--seed", type=int, default=0, help="seed of weights and batch order")
    parser.add_argument(
        "--threads",
        type=_ints,
        default=[1, 2],
        help="rnnfast thread counts of the step table (comma-separated); the "
        "sunspots runs use the last",
    )
    parser.add_argument("--skip-sunspots", action="store_true", help="the step table only")
    parser.add_argument(
        "--out",
        type=Path,
        default=RESULTS / "jordan_vs_rnn.json",
        help="JSON results file",
    )
    args = parser.parse_args(argv)
    isa = rnnfast._core.active_isa()
    print(f"ISA {isa}, float32, {len(os.sched_getaffinity(0))} CPUs available", flush=True)
    print("\nTraining step (forward + MSE + backward + Adam), medians of alternating repeats")
    print(STEP_HEAD)
    rows = bench_steps(args)
    result = {"isa": isa, "steps": rows}
    rnnfast.set_num_threads(args.threads[-1])
    threads = rnnfast.get_num_threads()
    if not args.skip_sunspots:
        sun = bench_sunspots(args)
        result["sunspots"] = {**sun, "threads": threads}
        print(
            f"\nSunspots: {sun['train_windows']} training / {sun['test_windows']} test "
            f"windows of {sun['window']} months, H = {sun['hidden']}, {sun['epochs']} epochs "
            f"(ISA {isa}, {threads} thread(s))"
        )
        print(f"{'model':<14}{'params':>8}{'s/epoch':>10}{'test RMSE':>11}")
        for name, m in sun["models"].items():
            print(f"{name:<14}{m['params']:>8}{m['epoch_s']:>10.3f}{m['test_rmse']:>11.2f}")
        print(f"{'persistence':<14}{'':>8}{'':>10}{sun['persistence_rmse']:>11.2f}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(f"\nresults written to {args.out}")


if __name__ == "__main__":
    sys.exit(main())
