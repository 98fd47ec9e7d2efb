"""rnnfast's threads beside NumPy's (OpenBLAS) and PyTorch's pools, in one process.

A training step of rnnfast (forward + backward) is timed alone and interleaved with the kind of
work that wakes the other pools, with and without threadpoolctl limits, and from several Python
threads at once; every scenario in this one process, as medians. Besides time, it counts the
process's involuntary context switches (a thread preempted because another wanted its core):
the direct sign of more runnable threads than cores.

    python -m bench.system.thread_pools [--repeats 15] [--threads 2]

NumPy's OpenBLAS is slowed by OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE overrides that some machines
set; like bench.peers.compare, this re-executes itself without them.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import statistics
import time
from pathlib import Path

import numpy as np
import threadpoolctl
import torch

import rnnfast
from bench._common import (
    BUSY_CPUS,
    blas_info,
    cpu_clock,
    others_cpus,
    reexec_without_blas_overrides,
)
from rnnfast import functional as F

SHAPE = (100, 32, 64, 256)  # T, B, D, H of the rnnfast training step
MATMUL = 384  # the square NumPy / PyTorch product run between steps (a dense layer's worth)


def involuntary_switches() -> int:
    """Involuntary context switches of every thread of this process so far, ended ones too."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_nivcsw


def make_problem():
    """x, W_ih and W_hh of the rnnfast training step, in float32."""
    T, B, D, H = SHAPE
    rng = np.random.default_rng(1)
    return (
        rng.standard_normal((T, B, D)).astype(np.float32),
        (rng.uniform(-1, 1, (H, D)) / 16).astype(np.float32),
        (rng.uniform(-1, 1, (H, H)) / 16).astype(np.float32),
    )


def rnnfast_step(problem):
    x, w_ih, w_hh = problem
    y, _ = F.rnn_forward(x, w_ih, w_hh)
    F.rnn_backward(x, w_ih, w_hh, y, y, None, **F.PLAIN_FORWARD_OPTIONS)


def timed(iteration, repeats: int, calls: int) -> dict:
    """Median over repeats of the seconds one iteration takes, and context switches per call."""
    for _ in range(calls):  # warm up: caches, thread pools, page faults
        iteration()
    samples, switches = [], 0
    for _ in range(repeats):
        before = involuntary_switches()
        start = time.perf_counter()
        for _ in range(calls):
            iteration()
        samples.append((time.perf_counter() - start) / calls)
        switches += involuntary_switches() - before
    return {"median_s": statistics.median(samples), "switches": switches / (repeats * calls)}


def scenarios(problem):
    """(name, what it shows, iteration function, context manager) for each scenario."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((MATMUL, MATMUL)).astype(np.float32)
    ta = torch.from_numpy(a)

    def alone():
        rnnfast_step(problem)

    def with_numpy():
        a @ a
        rnnfast_step(problem)

    def with_torch():
        ta @ ta
        rnnfast_step(problem)

    def numpy_only():
        a @ a

    def torch_only():
        ta @ ta

    def four_threads():  # 4 Python threads, one step each, at once: 4 steps per iteration
        import threading

        workers = [threading.Thread(target=rnnfast_step, args=(problem,)) for _ in range(4)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()

    blas1 = lambda: threadpoolctl.threadpool_limits(1, user_api="blas")
    none = contextlib.nullcontext
    return [
        ("rnnfast alone", alone, none),
        ("numpy matmul alone", numpy_only, none),
        ("torch matmul alone", torch_only, none),
        ("numpy matmul + rnnfast", with_numpy, none),
        ("numpy matmul + rnnfast, BLAS limited to 1", with_numpy, blas1),
        ("torch matmul + rnnfast", with_torch, none),
        ("4 Python threads x rnnfast (per step)", four_threads, none),
    ]


def print_extra_time(results: dict) -> None:
    """Each mix's time beyond the sum of its parts run alone, and the 4 callers' per-step time."""
    alone = results["rnnfast alone"]["median_s"]
    np_only = results["numpy matmul alone"]["median_s"]
    torch_only = results["torch matmul alone"]["median_s"]
    print("\nextra time beyond the sum of the parts run alone (oversubscription shows here):")
    for name, parts in (
        ("numpy matmul + rnnfast", np_only),
        ("numpy matmul + rnnfast, BLAS limited to 1", np_only),
        ("torch matmul + rnnfast", torch_only),
    ):
        extra = results[name]["median_s"] - (alone + parts)
        print(f"  {name:44s} {extra * 1e3:+8.2f} ms ({extra / (alone + parts):+.0%})")
    ratio = results["4 Python threads x rnnfast (per step)"]["median_s"] / alone
    print(f"  4 Python threads, per step vs one caller: {ratio:.2f}x the time")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=15, help="timed repeats per scenario")
    parser.add_argument("--calls", type=int, default=10, help="iterations per repeat")
    parser.add_argument(
        "--threads",
        type=int,
        default=os.cpu_count(),
        help="threads for each pool: rnnfast, OpenBLAS, PyTorch (default: cores)",
    )
    args = parser.parse_args(argv)
    reexec_without_blas_overrides()

    rnnfast.set_num_threads(args.threads)
    torch.set_num_threads(args.threads)
    threadpoolctl.threadpool_limits(args.threads, user_api="blas")
    T, B, D, H = SHAPE
    problem = make_problem()
    print(
        f"{os.cpu_count()} cores; every pool set to {args.threads} threads; "
        f"rnnfast step = forward + backward T={T} B={B} D={D} H={H} float32; "
        f"matmul {MATMUL}^3 float32"
    )
    print(
        "pools:",
        ", ".join(
            f"{i['internal_api']} {i['num_threads']} ({Path(i['filepath']).name})"
            for i in threadpoolctl.threadpool_info()
        ),
    )
    print("NumPy BLAS:", blas_info())
    print(f"{'scenario':44s} {'ms/iter':>9s} {'inv. switches/iter':>19s}")
    load = cpu_clock()
    results = {}
    for name, iteration, limit in scenarios(problem):
        with limit():
            r = timed(iteration, args.repeats, args.calls)
        if name.startswith("4 Python threads"):
            r["median_s"] /= 4
        results[name] = r
        print(f"{name:44s} {r['median_s'] * 1e3:9.2f} {r['switches']:19.1f}")
    print_extra_time(results)
    others = others_cpus(load)
    if others >= BUSY_CPUS:
        print(f"note: other processes kept {others:.1f} CPUs busy on average; rerun when idle")


if __name__ == "__main__":
    main()
