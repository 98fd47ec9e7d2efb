"""`python -m rnnfast demo`: train a forecaster on a chaotic series generated in code
(Mackey-Glass), report its test error against the naive baseline, then check the kernels
against the NumPy reference on a random problem and time the speed-up over it.

`python -m rnnfast demo --data ROOT` trains on the monthly sunspot numbers instead, from
`rnnfast.datasets.load("sunspots", ROOT)` (ROOT/sunspots/sunspots_monthly.dat, as in the
project's shared/data); `--series sunspots` without --data finds them through $RNNFAST_DATA,
the cache or a download. The trained model (and, with matplotlib, a plot of the forecast) go
into `--out`."""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np

from . import datasets, functional, reference
from ._config import show_config


def _median_seconds(fn, repeats):
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def mackey_glass(n=3000, tau=17, beta=0.2, gamma=0.1, power=10, substeps=10, seed=0):
    """The Mackey-Glass delay equation dx/dt = beta x(t-tau) / (1 + x(t-tau)^power) - gamma x,
    integrated by Euler steps of 1/substeps, sampled once per time unit: chaotic for tau=17."""
    rng = np.random.default_rng(seed)
    dt = 1.0 / substeps
    lag = tau * substeps
    history = list(1.2 + 0.1 * rng.standard_normal(lag + 1))
    for _ in range(n * substeps):  # generating data, not a kernel: a plain loop is clearest
        x, delayed = history[-1], history[-1 - lag]
        history.append(x + dt * (beta * delayed / (1 + delayed**power) - gamma * x))
    return np.array(history[lag + 1 :: substeps][:n])


def windows(series, width, horizon):
    """(N, width, 1) inputs and (N, 1) targets: the value `horizon` steps after each window."""
    n = len(series) - width - horizon + 1
    index = np.arange(width)[None, :] + np.arange(n)[:, None]
    return series[index][:, :, None], series[index[:, -1] + horizon][:, None]


def train_forecaster(series, *, width=32, horizon=5, hidden=32, epochs=8, seed=0, out=None):
    """Train RNN -> Dense on the first 80% of the series; returns (test RMSE, naive RMSE) in
    the series' units. The naive forecast repeats the last value of the window. With ``out``
    (a folder) the model is saved there (demo_forecaster.npz), and with matplotlib a plot of
    the test forecast (demo_forecast.png)."""
    from . import RNN, Dense, Sequential, optim, training

    split = int(0.8 * len(series))
    mean, scale = series[:split].mean(), series[:split].std()
    scaled = ((series - mean) / scale).astype(np.float32)
    x_train, y_train = windows(scaled[:split], width, horizon)
    x_test, y_test = windows(scaled[split - width - horizon + 1 :], width, horizon)
    model = Sequential(
        [
            RNN(1, hidden, batch_first=True, return_sequences=False, seed=seed),
            Dense(hidden, 1, seed=seed + 1),
        ]
    )
    print(
        f"\nforecasting {horizon} steps ahead from windows of {width}: "
        f"{len(x_train)} training and {len(x_test)} test windows"
    )
    training.fit(
        model,
        x_train,
        y_train,
        loss="mse",
        optimizer=optim.Adam(model, lr=3e-3),
        epochs=epochs,
        batch_size=32,
        seed=seed,
        validation_data=(x_test, y_test),
    )
    predicted = training.predict(model, x_test)
    rmse = float(np.sqrt(np.mean((predicted - y_test) ** 2))) * scale
    naive = float(np.sqrt(np.mean((x_test[:, -1] - y_test) ** 2))) * scale
    print(
        f"test RMSE {rmse:.4f}, naive (last value) {naive:.4f}: "
        f"{'better' if rmse < naive else 'NOT better'} than the naive forecast"
    )
    if out is not None:
        model.save(Path(out) / "demo_forecaster.npz")
        print(f"model saved to {Path(out) / 'demo_forecaster.npz'}")
        _forecast_plot(
            y_test[:, 0] * scale + mean,
            predicted[:, 0] * scale + mean,
            horizon,
            Path(out) / "demo_forecast.png",
        )
    return rmse, naive


def _forecast_plot(truth, forecast, horizon, path):
    try:
        import matplotlib
    except ImportError:
        print('matplotlib is not installed (pip install ".[examples]"): no forecast plot')
        return
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 4))
    ax.plot(truth, color="k", lw=1, label="test series")
    ax.plot(forecast, color="C1", lw=1, label=f"RNN forecast ({horizon} steps ahead)")
    ax.set_xlabel("test step")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    print(f"forecast plot written to {path}")


def run(steps=100, batch=32, input_size=64, hidden_size=128, repeats=5, seed=0):
    """Returns True when rnnfast matches the reference (float32 tolerance) on every output."""
    show_config()
    rng = np.random.default_rng(seed)
    bound = 1 / np.sqrt(hidden_size)
    f32 = np.float32
    x = rng.standard_normal((steps, batch, input_size)).astype(f32)
    w_ih = rng.uniform(-bound, bound, (hidden_size, input_size)).astype(f32)
    w_hh = rng.uniform(-bound, bound, (hidden_size, hidden_size)).astype(f32)
    b_ih, b_hh = (rng.uniform(-bound, bound, hidden_size).astype(f32) for _ in range(2))
    dy = rng.standard_normal((steps, batch, hidden_size)).astype(f32)

    def fast():
        y, _ = functional.rnn_forward(x, w_ih, w_hh, b_ih, b_hh)
        return y, functional.rnn_backward(x, w_ih, w_hh, y, dy, **functional.PLAIN_FORWARD_OPTIONS)

    def slow():
        y, _ = reference.rnn_forward(x, w_ih, w_hh, b_ih, b_hh)
        return y, reference.rnn_backward(x, w_ih, w_hh, y, dy, **functional.PLAIN_FORWARD_OPTIONS)

    y_fast, grads_fast = fast()
    y_ref, grads_ref = slow()
    names = ["y", "dx", "dh0", "dweight_ih", "dweight_hh", "dbias"]
    ok = True
    print(f"\nproblem: T={steps} B={batch} D={input_size} H={hidden_size} float32, tanh")
    for name, a, b in zip(names, (y_fast, *grads_fast), (y_ref, *grads_ref)):
        err = float(np.max(np.abs(a - b)) / (1 + np.max(np.abs(b))))
        good = err < 1e-4
        ok &= good
        print(f"  {name:<11} max rel. error vs reference {err:.1e}  {'ok' if good else 'MISMATCH'}")
    t_fast = _median_seconds(fast, repeats)
    t_slow = _median_seconds(slow, repeats)
    print(
        f"\nforward + backward, median of {repeats}: rnnfast {t_fast * 1e3:.2f} ms, "
        f"NumPy reference {t_slow * 1e3:.2f} ms, speed-up {t_slow / t_fast:.1f}x"
    )
    print("check:", "PASSED" if ok else "FAILED")
    return ok


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Each option's default after its help, but for those whose help says what None means."""

    def _get_help_string(self, action):
        return action.help if action.default is None else super()._get_help_string(action)


def _parser():
    parser = argparse.ArgumentParser(
        prog="python -m rnnfast",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser(
        "demo",
        help="train a forecaster, then check and time the kernels",
        description=__doc__.split("\n\n")[0],
        formatter_class=_HelpFormatter,
    )
    demo.add_argument(
        "--data",
        type=Path,
        default=None,
        metavar="ROOT",
        help="the datasets root (a folder laid out as the project's shared/data, "
        "ROOT/sunspots/sunspots_monthly.dat): train on the sunspot numbers "
        "found there; without it the series is generated (see --series)",
    )
    demo.add_argument(
        "--series",
        choices=("mackey-glass", "sunspots"),
        default=None,
        help="the series to forecast; by default mackey-glass, generated in code, "
        "or sunspots when --data is given (without --data, rnnfast.datasets "
        "looks in $RNNFAST_DATA, then the cache, then downloads it)",
    )
    demo.add_argument(
        "--out",
        type=Path,
        default=Path("rnnfast-out"),
        metavar="DIR",
        help="folder for the trained model and the forecast plot",
    )
    demo.add_argument("--epochs", type=int, default=8, help="training epochs of the forecaster")
    demo.add_argument("--steps", type=int, default=100, help="T of the kernel check")
    demo.add_argument("--batch", type=int, default=32, help="B of the kernel check")
    demo.add_argument("--input-size", type=int, default=64, help="D of the kernel check")
    demo.add_argument("--hidden-size", type=int, default=128, help="H of the kernel check")
    demo.add_argument("--repeats", type=int, default=5, help="timed repeats of the kernel check")
    sub.add_parser("config", help="print the build and run-time configuration")
    return parser, demo


def main(argv=None):
    parser, demo = _parser()
    args = parser.parse_args(argv)
    if args.command == "config":
        show_config()
        return 0

    def fail(message):  # one line and argparse's exit status 2, no traceback
        demo.exit(2, f"{demo.prog}: error: {message}\n")

    if args.series == "mackey-glass" and args.data is not None:
        fail("--data: the mackey-glass series is generated; --data gives the sunspots")
    try:
        args.out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        fail(f"--out {args.out}: {exc.strerror or exc}")
    if (args.series or ("sunspots" if args.data is not None else "mackey-glass")) == "sunspots":
        try:
            series = datasets.load("sunspots", args.data).values
        except (OSError, ValueError) as exc:
            fail(f"--data: {exc}" if args.data is not None else str(exc))
        print(f"series: monthly sunspot numbers, {len(series)} months")
    else:
        series = mackey_glass()
        print("series: Mackey-Glass (tau=17), generated")
    rmse, naive = train_forecaster(series, epochs=args.epochs, out=args.out)
    ok = run(args.steps, args.batch, args.input_size, args.hidden_size, args.repeats)
    return 0 if ok and rmse < naive else 1
