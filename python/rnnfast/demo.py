"""`python -m rnnfast demo`: train a forecaster on a chaotic series generated in code
(Mackey-Glass), report its test error against the naive baseline, then check the kernels
against the NumPy reference on a random problem and time the speed-up over it.

`python -m rnnfast demo --data DIR` trains on a monthly series in the format of
../shared/data/sunspots/sunspots_monthly.dat (rows of a year and twelve values) instead."""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from . import functional, reference
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


def monthly_series(directory):
    """The values of a file of rows 'year v1 .. v12' (header and note lines skipped)."""
    from pathlib import Path

    path = next(Path(directory).glob("*.dat"), None)
    if path is None:
        raise FileNotFoundError(f"--data {directory}: no .dat file of monthly values there")
    values = []
    for line in path.read_text().splitlines():
        fields = line.split()
        if len(fields) == 13 and fields[0].isdigit():
            values.extend(float(v) for v in fields[1:])
    return np.array(values)


def windows(series, width, horizon):
    """(N, width, 1) inputs and (N, 1) targets: the value `horizon` steps after each window."""
    n = len(series) - width - horizon + 1
    index = np.arange(width)[None, :] + np.arange(n)[:, None]
    return series[index][:, :, None], series[index[:, -1] + horizon][:, None]


def train_forecaster(series, *, width=32, horizon=5, hidden=32, epochs=8, seed=0):
    """Train RNN -> Dense on the first 80% of the series; returns (test RMSE, naive RMSE) in
    the series' units. The naive forecast repeats the last value of the window."""
    from . import RNN, Dense, Sequential, optim, training

    split = int(0.8 * len(series))
    mean, scale = series[:split].mean(), series[:split].std()
    scaled = ((series - mean) / scale).astype(np.float32)
    x_train, y_train = windows(scaled[:split], width, horizon)
    x_test, y_test = windows(scaled[split - width - horizon + 1 :], width, horizon)
    model = Sequential([RNN(1, hidden, batch_first=True, return_sequences=False, seed=seed),
                        Dense(hidden, 1, seed=seed + 1)])
    print(f"\nforecasting {horizon} steps ahead from windows of {width}: "
          f"{len(x_train)} training and {len(x_test)} test windows")
    training.fit(model, x_train, y_train, loss="mse", optimizer=optim.Adam(model, lr=3e-3),
                 epochs=epochs, batch_size=32, seed=seed, validation_data=(x_test, y_test))
    predicted = training.predict(model, x_test)
    rmse = float(np.sqrt(np.mean((predicted - y_test) ** 2))) * scale
    naive = float(np.sqrt(np.mean((x_test[:, -1] - y_test) ** 2))) * scale
    print(f"test RMSE {rmse:.4f}, naive (last value) {naive:.4f}: "
          f"{'better' if rmse < naive else 'NOT better'} than the naive forecast")
    return rmse, naive


# rnn_backward's required keywords for a forward given none of these options (h0 included).
PLAIN_BACKWARD = {"h0": None, "nonlinearity": "tanh", "lengths": None, "alpha": 1.0,
                  "step_mask": None, "zero_output_for_mask": False, "recurrent_mask": None}


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
        return y, functional.rnn_backward(x, w_ih, w_hh, y, dy, **PLAIN_BACKWARD)

    def slow():
        y, _ = reference.rnn_forward(x, w_ih, w_hh, b_ih, b_hh)
        return y, reference.rnn_backward(x, w_ih, w_hh, y, dy, **PLAIN_BACKWARD)

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
    print(f"\nforward + backward, median of {repeats}: rnnfast {t_fast * 1e3:.2f} ms, "
          f"NumPy reference {t_slow * 1e3:.2f} ms, speed-up {t_slow / t_fast:.1f}x")
    print("check:", "PASSED" if ok else "FAILED")
    return ok


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m rnnfast", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="train a forecaster, then check and time the kernels")
    demo.add_argument("--data", default=None,
                      help="a folder with a monthly series (.dat, rows 'year v1..v12')")
    demo.add_argument("--epochs", type=int, default=8)
    demo.add_argument("--steps", type=int, default=100)
    demo.add_argument("--batch", type=int, default=32)
    demo.add_argument("--input-size", type=int, default=64)
    demo.add_argument("--hidden-size", type=int, default=128)
    demo.add_argument("--repeats", type=int, default=5)
    sub.add_parser("config", help="print the build and run-time configuration")
    args = parser.parse_args(argv)
    if args.command == "config":
        show_config()
        return 0
    series = mackey_glass() if args.data is None else monthly_series(args.data)
    print("series:", "Mackey-Glass (tau=17), generated" if args.data is None else args.data)
    rmse, naive = train_forecaster(series, epochs=args.epochs)
    ok = run(args.steps, args.batch, args.input_size, args.hidden_size, args.repeats)
    return 0 if ok and rmse < naive else 1
