"""`python -m rnnfast demo`: forward and backward on a random problem, checked against the
NumPy reference, and the speed-up over it."""

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
        return y, functional.rnn_backward(x, w_ih, w_hh, y, dy)

    def slow():
        y, _ = reference.rnn_forward(x, w_ih, w_hh, b_ih, b_hh)
        return y, reference.rnn_backward(x, w_ih, w_hh, y, dy)

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
    demo = sub.add_parser("demo", help="forward+backward vs the NumPy reference, with timing")
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
    ok = run(args.steps, args.batch, args.input_size, args.hidden_size, args.repeats)
    return 0 if ok else 1
