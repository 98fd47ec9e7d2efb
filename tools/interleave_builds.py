"""Two builds of rnnfast's compiled module timed in lock step.

compare_builds.py runs bench.peers.compare once per build in turn, so on a shared machine a
row's old/new ratio carries whatever load came and went between the runs (rounds of the same
build moved by 0.5-2x here). This script keeps one worker process per build (pybind11 refuses
two modules that register the same types in one process) and has them time the same arrays in
turn, one timing loop of --min-ms each, the first of each pair alternating; so both sides see
the same load within milliseconds. Each row's figure is the median of the per-pair new/old
ratios. The workers also check that both builds return the same bits (a digest of the outputs).

    python tools/interleave_builds.py OLD_CORE.so NEW_CORE.so [--pairs 15] [--threads 1,2]
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.machinery
import importlib.util
import json
import statistics
import subprocess
import sys
import time

import numpy as np

SHAPES = [  # T x B x D x H: bench.peers.compare's quick grid, its extra shapes and H = 1024
    (200, 1, 32, 64),
    (100, 16, 64, 128),
    (50, 32, 512, 512),
    (64, 8, 300, 300),
    (25, 64, 1024, 1024),
    (100, 1, 1024, 1024),
]


def load_core(path):
    """The extension at ``path`` as a module named ``_core`` (its init is PyInit__core)."""
    loader = importlib.machinery.ExtensionFileLoader("_core", path)
    spec = importlib.util.spec_from_file_location("_core", path, loader=loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def problem(shape, dtype):
    T, B, D, H = shape
    rng = np.random.default_rng(0)
    return (
        rng.standard_normal((T, B, D)).astype(dtype),
        (rng.standard_normal((H, D)) / np.sqrt(D)).astype(dtype),
        (rng.standard_normal((H, H)) / np.sqrt(H)).astype(dtype),
        (0.1 * rng.standard_normal(H)).astype(dtype),
        np.ones((T, B, H), dtype),
    )


def worker(path):
    """Reads one JSON command a line: set up a row (answers the outputs' digest), or time it
    (answers seconds per call)."""
    core, fn = load_core(path), None
    for line in sys.stdin:
        cmd = json.loads(line)
        if cmd["op"] == "setup":
            core.set_num_threads(cmd["threads"])
            p = problem(tuple(cmd["shape"]), np.dtype(cmd["dtype"]))
            fn = calls(core, p, cmd["mode"])
            digest = hashlib.sha256()
            for a in fn():
                if a is not None:
                    digest.update(np.ascontiguousarray(a).tobytes())
            timed(fn, 0.1)  # warm-up
            answer = digest.hexdigest()
        else:
            answer = timed(fn, cmd["min_s"])
        print(json.dumps(answer), flush=True)


class Worker:
    def __init__(self, path):
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--worker", path],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def ask(self, **cmd):
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())


def calls(core, p, mode):
    x, w_ih, w_hh, b, dy = p
    if mode == "fwd_seq":
        return lambda: core.rnn_forward(x, None, w_ih, w_hh, b, b, None, "tanh", 1.0, True)
    if mode == "fwd_last":
        return lambda: core.rnn_forward(x, None, w_ih, w_hh, b, b, None, "tanh", 1.0, False)

    def train():
        y, _ = core.rnn_forward(x, None, w_ih, w_hh, b, b, None, "tanh", 1.0, True)
        return core.rnn_backward(x, None, w_ih, w_hh, y, dy, None, None, "tanh", 1.0)

    return train


def timed(fn, min_s):
    """Seconds per call over a loop of at least ``min_s``."""
    n, start = 0, time.perf_counter()
    while True:
        fn()
        n += 1
        elapsed = time.perf_counter() - start
        if elapsed >= min_s:
            return elapsed / n


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        return worker(sys.argv[2])
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--pairs", type=int, default=15, help="old/new pairs per row (default 15)")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--min-ms", type=float, default=20.0, help="each timing loops this long")
    args = ap.parse_args()
    old, new = Worker(args.old), Worker(args.new)
    print(f"pairs {args.pairs}, {args.min_ms} ms timing loops; the active ISA of each build")
    print(
        f"{'shape':<18} {'dtype':<8} {'thr':>3} {'mode':<9} {'old ms':>9} {'new ms':>9} "
        f"{'new/old':>8} {'q25-q75':>13}"
    )
    rows = []
    for threads in (int(t) for t in args.threads.split(",")):
        for shape in SHAPES:
            for dtype in (np.float32, np.float64) if shape[3] <= 300 else (np.float32,):
                for mode in ("fwd_seq", "fwd_last", "train"):
                    row = dict(shape=shape, dtype=np.dtype(dtype).name, mode=mode, threads=threads)
                    if old.ask(op="setup", **row) != new.ask(op="setup", **row):
                        raise SystemExit(f"{row}: the builds disagree")
                    f_old = lambda: old.ask(op="time", min_s=args.min_ms / 1e3)
                    f_new = lambda: new.ask(op="time", min_s=args.min_ms / 1e3)
                    t_old, t_new, ratios = [], [], []
                    for i in range(args.pairs):  # which goes first alternates
                        first, second = (f_old, f_new) if i % 2 == 0 else (f_new, f_old)
                        a, b = first(), second()
                        o, n = (a, b) if i % 2 == 0 else (b, a)
                        t_old.append(o)
                        t_new.append(n)
                        ratios.append(n / o)
                    q = statistics.quantiles(ratios, n=4)
                    r = statistics.median(ratios)
                    rows.append(r)
                    name = "x".join(map(str, shape))
                    print(
                        f"{name:<18} {np.dtype(dtype).name:<8} {threads:>3} {mode:<9} "
                        f"{1e3 * statistics.median(t_old):>9.3f} "
                        f"{1e3 * statistics.median(t_new):>9.3f} {r:>8.3f} "
                        f"{q[0]:>6.3f}-{q[2]:<6.3f}",
                        flush=True,
                    )
    inside = sum(abs(r - 1) <= 0.05 for r in rows)
    print(
        f"{len(rows)} rows; median of medians {statistics.median(rows):.3f}, range "
        f"{min(rows):.3f}-{max(rows):.3f}; {inside} within +-5%"
    )


if __name__ == "__main__":
    main()
